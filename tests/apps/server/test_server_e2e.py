"""era_server end to end on loopback.

Starts era_server --port 0 on the tiny bundle and checks, through curl, the official openai
client and raw sockets: the non-streamed and streamed answers (equal to each other and to
era_infer's on the same image and prompt, greedy), /v1/models, /health, concurrent requests (all
answered, all equal), the --queue limit (503), a client leaving mid-stream (generation cancelled,
next request served), the error statuses (400 malformed JSON / bad field named, 403 disallowed
file and http URL, 404, 405, 413) and SIGTERM (exit 0); and hostile clients (HostileClients): heads
trickled byte by byte, idle connections, too many connections from one client or in all, bodies
over --max-body-bytes by Content-Length or chunked, other framings httplib mishandles, and an
unstreamed request whose client leaves.
"""
import argparse
import base64
import concurrent.futures
import http.client
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

ARGS = None
PROMPT = "What is in the picture?"
MAX_TOKENS = 12


class Server:
    """One era_server process; its stderr (one log line per request) is kept for the checks."""

    def __init__(self, *extra):
        cmd = [ARGS.server, "-m", ARGS.bundle, "--port", "0", *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if "listening on http://" not in line:
            self.proc.kill()
            raise RuntimeError(f"era_server did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(line.split("http://127.0.0.1:")[1].split()[0])
        self.log = []
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()

    def _read_log(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def request(self, method, path, body=None, timeout=120):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
        conn.close()
        return resp.status, resp.getheader("Content-Type"), raw

    def json(self, method, path, body=None):
        status, ctype, raw = self.request(method, path, body)
        return status, json.loads(raw)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self._reader.join(timeout=5)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return rc


def data_url(path):
    with open(path, "rb") as f:
        return "data:image/png;base64," + base64.b64encode(f.read()).decode()


def chat_body(url, **extra):
    body = {"model": "tiny", "max_tokens": MAX_TOKENS,
            "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                      {"type": "text", "text": PROMPT}]}]}
    body.update(extra)
    return body


def parse_sse(text):
    """The data: payloads of an event stream, in order."""
    events = [block for block in text.split("\n\n") if block.strip()]
    payloads = []
    for block in events:
        assert block.startswith("data: "), block
        payloads.append(block[len("data: "):])
    return payloads


class ServerEndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        shutil.rmtree(ARGS.scratch, ignore_errors=True)
        cls.allowed = os.path.join(os.path.abspath(ARGS.scratch), "allowed")
        os.makedirs(cls.allowed)
        cls.allowed_image = os.path.join(cls.allowed, "sample.png")
        shutil.copy(ARGS.image, cls.allowed_image)
        cls.server = Server("--allow-dir", cls.allowed, "--max-body-bytes", str(1 << 20))
        cls.url = data_url(ARGS.image)
        # era_infer on the same image and prompt, greedy: the reference answer.
        out = subprocess.run([ARGS.infer, "-m", ARGS.bundle, "-i", ARGS.image, "-p", PROMPT,
                              "-n", str(MAX_TOKENS), "--json"], capture_output=True, text=True, check=True)
        cls.reference = json.loads(out.stdout)

    @classmethod
    def tearDownClass(cls):
        rc = cls.server.stop()
        assert rc == 0, f"era_server exited {rc} on SIGTERM: {''.join(cls.server.log)}"

    def base(self):
        return f"http://127.0.0.1:{self.server.port}"

    def curl(self, body, *extra):
        out = subprocess.run(["curl", "-sS", "-N", *extra, "-H", "Content-Type: application/json",
                              "--data-binary", "@-", self.base() + "/v1/chat/completions"],
                             input=json.dumps(body), capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout

    def expect_error(self, status, got_status, got, param=None, needle=None):
        self.assertEqual(got_status, status, got)
        err = got["error"]
        self.assertTrue(set(err) >= {"message", "type", "param", "code"}, got)
        if param is not None:
            self.assertEqual(err["param"], param, got)
            self.assertIn(param, err["message"])
        if needle is not None:
            self.assertIn(needle, err["message"])

    def test_curl_answer_equals_era_infer_and_stream(self):
        answer = json.loads(self.curl(chat_body(self.url)))
        self.assertEqual(answer["object"], "chat.completion")
        choice = answer["choices"][0]
        self.assertEqual(choice["message"]["role"], "assistant")
        self.assertEqual(choice["message"]["content"], self.reference["answer"])
        self.assertEqual(choice["finish_reason"], {"eos": "stop", "length": "length"}[self.reference["finish_reason"]])
        self.assertEqual(answer["usage"]["completion_tokens"], len(self.reference["tokens"]))
        self.assertEqual(answer["usage"]["prompt_tokens"], self.reference["stats"]["prompt_tokens"])
        self.assertEqual(answer["era"]["visual_tokens"], self.reference["stats"]["visual_tokens"])
        self.assertEqual(answer["model"], self.reference["model"]["name"])

        payloads = parse_sse(self.curl(chat_body(self.url, stream=True)))
        self.assertEqual(payloads[-1], "[DONE]")
        chunks = [json.loads(p) for p in payloads[:-1]]
        self.assertTrue(all(c["object"] == "chat.completion.chunk" for c in chunks))
        self.assertEqual(chunks[0]["choices"][0]["delta"].get("role"), "assistant")
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
        self.assertEqual(text, self.reference["answer"])
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], choice["finish_reason"])
        self.assertEqual(chunks[-1]["usage"], answer["usage"])
        self.assertTrue(all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1]))

    def test_era_extension_reduces(self):
        status, got = self.server.json("POST", "/v1/chat/completions",
                                       chat_body(self.url, era={"method": "era", "tokens": 64, "era_set": ["alpha=0.3"]}))
        self.assertEqual(status, 200, got)
        self.assertEqual(got["era"]["method"], "era")
        self.assertEqual(got["era"]["visual_tokens"], 64)
        out = subprocess.run([ARGS.infer, "-m", ARGS.bundle, "-i", ARGS.image, "-p", PROMPT, "-n", str(MAX_TOKENS),
                              "--json", "--method", "era", "--tokens", "64", "--era-set", "alpha=0.3"],
                             capture_output=True, text=True, check=True)
        self.assertEqual(got["choices"][0]["message"]["content"], json.loads(out.stdout)["answer"])

    def test_openai_client(self):
        import openai
        client = openai.OpenAI(base_url=self.base() + "/v1", api_key="unused")
        models = client.models.list()
        self.assertEqual([m.id for m in models.data], [self.reference["model"]["name"]])
        messages = chat_body(self.url)["messages"]
        completion = client.chat.completions.create(model="tiny", messages=messages, max_tokens=MAX_TOKENS)
        self.assertEqual(completion.choices[0].message.content, self.reference["answer"])
        self.assertEqual(completion.usage.completion_tokens, len(self.reference["tokens"]))
        stream = client.chat.completions.create(model="tiny", messages=messages, max_tokens=MAX_TOKENS, stream=True,
                                                stream_options={"include_usage": True})
        pieces, usage = [], None
        for chunk in stream:
            if chunk.choices:
                pieces.append(chunk.choices[0].delta.content or "")
            if chunk.usage:
                usage = chunk.usage
        self.assertEqual("".join(pieces), self.reference["answer"])
        self.assertEqual(usage.completion_tokens, len(self.reference["tokens"]))
        # The era extension through the client's extra_body.
        reduced = client.chat.completions.create(model="tiny", messages=messages, max_tokens=MAX_TOKENS,
                                                 extra_body={"era": {"method": "era", "tokens": 64}})
        self.assertEqual(reduced.model_extra["era"]["visual_tokens"], 64)
        # A refused request surfaces as the client's BadRequestError carrying the server's message.
        with self.assertRaises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="tiny", messages=messages, max_tokens=MAX_TOKENS, n=2)
        self.assertIn("n: only n = 1", str(caught.exception))

    def test_conversation_with_system_and_history(self):
        first = chat_body(self.url)["messages"][0]
        body = {"max_tokens": MAX_TOKENS,
                "messages": [{"role": "system", "content": "You describe pictures."}, first,
                             {"role": "assistant", "content": self.reference["answer"]},
                             {"role": "user", "content": "And the colours?"}]}
        status, single = self.server.json("POST", "/v1/chat/completions",
                                          {"max_tokens": MAX_TOKENS, "messages": body["messages"][:2]})
        self.assertEqual(status, 200, single)
        # The system message replaces the template's (a different prompt length than the default's).
        self.assertNotEqual(single["usage"]["prompt_tokens"], self.reference["stats"]["prompt_tokens"])
        status, got = self.server.json("POST", "/v1/chat/completions", body)
        self.assertEqual(status, 200, got)
        # The earlier turn and the answer given reach the model ahead of the new question.
        self.assertGreater(got["usage"]["prompt_tokens"], single["usage"]["prompt_tokens"] + 5)
        self.assertEqual(got["era"]["visual_tokens"], self.reference["stats"]["visual_tokens"])
        # A history that does not alternate is refused naming the message.
        body["messages"].insert(2, {"role": "user", "content": "again"})
        status, got = self.server.json("POST", "/v1/chat/completions", body)
        self.expect_error(400, status, got, param="messages[2].role")
        # max_tokens at the model's context: refused before queueing.
        status, got = self.server.json("POST", "/v1/chat/completions", chat_body(self.url, max_tokens=1 << 20))
        self.expect_error(400, status, got, needle="context")

    def test_local_files(self):
        status, got = self.server.json("POST", "/v1/chat/completions", chat_body("file://" + self.allowed_image))
        self.assertEqual(status, 200, got)
        self.assertEqual(got["choices"][0]["message"]["content"], self.reference["answer"])
        field = "messages[0].content[0].image_url.url"
        for url in (os.path.abspath(ARGS.image), self.allowed + "/../../../../etc/passwd", "file:///etc/passwd"):
            status, got = self.server.json("POST", "/v1/chat/completions", chat_body(url))
            self.expect_error(403, status, got, param=field)
            self.assertEqual(got["error"]["type"], "permission_error")
        status, got = self.server.json("POST", "/v1/chat/completions", chat_body("https://example.com/cat.png"))
        self.expect_error(403, status, got, param=field, needle="not fetched")

    def test_errors(self):
        status, ctype, raw = self.server.request("POST", "/v1/chat/completions", b"{not json")
        self.assertEqual(ctype, "application/json")
        self.expect_error(400, status, json.loads(raw), needle="not valid JSON")
        body = chat_body(self.url)
        body["messages"].insert(0, {"role": "user", "content": "earlier"})
        body["messages"].insert(1, {"role": "assistant", "content": "ok"})
        body["messages"][2]["content"][1] = {"type": "audio", "audio": "x"}
        status, got = self.server.json("POST", "/v1/chat/completions", body)
        self.expect_error(400, status, got, param="messages[2].content[1].type")
        status, got = self.server.json("POST", "/v1/chat/completions", chat_body(self.url, temperature="warm"))
        self.expect_error(400, status, got, param="temperature")
        status, got = self.server.json("POST", "/v1/chat/completions", chat_body(self.url, era={"method": "bogus"}))
        self.expect_error(400, status, got, param="era.method")
        status, got = self.server.json("GET", "/v1/nothing")
        self.expect_error(404, status, got)
        status, got = self.server.json("GET", "/v1/chat/completions")
        self.expect_error(405, status, got)
        status, got = self.server.json("DELETE", "/health")
        self.expect_error(405, status, got)
        # An image that does not decode fails in the model, after a stream's 200 status line: the
        # error comes as an event naming the image, then [DONE]; unstreamed it is a 400.
        broken = chat_body("data:image/png;base64," + base64.b64encode(b"not a picture").decode())
        status, got = self.server.json("POST", "/v1/chat/completions", broken)
        self.expect_error(400, status, got)
        status, _, raw = self.server.request("POST", "/v1/chat/completions", dict(broken, stream=True))
        self.assertEqual(status, 200)
        payloads = parse_sse(raw.decode())
        self.assertEqual(payloads[-1], "[DONE]")
        event = json.loads(payloads[-2])
        self.assertEqual(event["error"]["type"], "invalid_request_error", event)
        self.assertEqual(json.loads(payloads[0])["choices"][0]["delta"]["role"], "assistant")
        # Over --max-body-bytes (1 MiB): 413 with the JSON body (curl sends it whole or is cut off).
        big = chat_body("data:image/png;base64," + "A" * (2 << 20))
        out = subprocess.run(["curl", "-sS", "-H", "Content-Type: application/json", "--data-binary", "@-",
                              "-w", "\n%{http_code}", self.base() + "/v1/chat/completions"],
                             input=json.dumps(big), capture_output=True, text=True, timeout=60)
        text, code = out.stdout.rsplit("\n", 1)
        self.assertEqual(code, "413", out)
        self.expect_error(413, 413, json.loads(text), needle="--max-body-bytes")
        # Still serving after all of that.
        status, got = self.server.json("GET", "/health")
        self.assertEqual((status, got["status"]), (200, "ok"))

    def test_models_and_health(self):
        status, got = self.server.json("GET", "/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(got["object"], "list")
        self.assertEqual(got["data"][0]["id"], self.reference["model"]["name"])
        status, got = self.server.json("GET", "/health")
        self.assertEqual(status, 200)
        self.assertEqual(got["status"], "ok")
        self.assertEqual(got["queue"]["capacity"], 8)
        self.assertIn("pending", got["queue"])

    def test_concurrent_requests_all_equal_the_single_answer(self):
        body = chat_body(self.url)
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            results = list(pool.map(lambda _: self.server.json("POST", "/v1/chat/completions", body), range(6)))
        for status, got in results:
            self.assertEqual(status, 200, got)
            self.assertEqual(got["choices"][0]["message"]["content"], self.reference["answer"])
        self.assertEqual(len({got["id"] for _, got in results}), 6)

    def test_client_leaving_mid_stream_cancels_and_the_server_goes_on(self):
        body = json.dumps({"max_tokens": 1500, "stream": True, "era": {"ignore_eos": True},
                           "messages": [{"role": "user", "content": "Tell me a long story."}]}).encode()
        sock = socket.create_connection(("127.0.0.1", self.server.port), timeout=60)
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        received = b""
        while received.count(b"data: ") < 3:
            piece = sock.recv(4096)
            self.assertTrue(piece, "the stream ended early")
            received += piece
        sock.close()
        deadline = time.time() + 60
        while time.time() < deadline and not any("went away mid-stream" in l for l in self.server.log):
            time.sleep(0.05)
        self.assertTrue(any("went away mid-stream" in l for l in self.server.log), "".join(self.server.log))
        status, got = self.server.json("POST", "/v1/chat/completions", chat_body(self.url))
        self.assertEqual(status, 200, got)
        self.assertEqual(got["choices"][0]["message"]["content"], self.reference["answer"])


class QueueLimit(unittest.TestCase):
    def test_requests_beyond_the_queue_get_503(self):
        server = Server("--queue", "1", "-q")
        try:
            body = {"max_tokens": 300, "era": {"ignore_eos": True},
                    "messages": [{"role": "user", "content": "Count to a thousand."}]}
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                results = list(pool.map(lambda _: server.json("POST", "/v1/chat/completions", body), range(8)))
            statuses = sorted(status for status, _ in results)
            self.assertIn(200, statuses)
            self.assertIn(503, statuses)
            self.assertEqual(set(statuses), {200, 503}, results)
            for status, got in results:
                if status == 503:
                    self.assertEqual(got["error"]["code"], "queue_full")
                    self.assertIn("--queue", got["error"]["message"])
                else:
                    self.assertEqual(got["usage"]["completion_tokens"], 300)
                    self.assertEqual(got["choices"][0]["finish_reason"], "length")
        finally:
            self.assertEqual(server.stop(), 0)



class TimeLimit(unittest.TestCase):
    """--timeout-s: a generation that reaches it stops with finish_reason "timeout", answered or
    streamed, and the server goes on. (A request whose time runs out while it waits in the queue
    is refused with 503 queue_timeout: Generation.ADeadlinePassedInTheQueueIsRefusedWithoutRunning.)"""

    def test_a_generation_reaching_the_time_limit_stops_with_finish_reason_timeout(self):
        # A tenth of a second: a 2-core Zen 5 VM generates 1500 of the tiny model's tokens in under
        # one (about 2100 a second), so a whole-second limit let the generation end on its length.
        server = Server("--timeout-s", "0.1", "-q")
        try:
            body = {"max_tokens": 1500, "era": {"ignore_eos": True},
                    "messages": [{"role": "user", "content": "Count to a thousand."}]}
            status, got = server.json("POST", "/v1/chat/completions", body)
            self.assertEqual(status, 200, got)
            self.assertEqual(got["choices"][0]["finish_reason"], "timeout")
            self.assertLess(got["usage"]["completion_tokens"], 1500)
            status, _, raw = server.request("POST", "/v1/chat/completions", dict(body, stream=True))
            self.assertEqual(status, 200)
            payloads = parse_sse(raw.decode())
            self.assertEqual(payloads[-1], "[DONE]")
            self.assertEqual(json.loads(payloads[-2])["choices"][0]["finish_reason"], "timeout")
            status, got = server.json("GET", "/health")
            self.assertEqual((status, got["status"]), (200, "ok"))
        finally:
            self.assertEqual(server.stop(), 0)

def connect(port, source="127.0.0.1", timeout=10):
    """A raw client socket to the server from the loopback address `source` (any 127.x.y.z is
    this machine on Linux: distinct client addresses for the per-client limit)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def read_answer(sock, limit_s):
    """Whatever the server sends until it closes or `limit_s` passes: (bytes, seconds taken)."""
    start = time.monotonic()
    data = b""
    while time.monotonic() - start < limit_s:
        sock.settimeout(max(0.01, limit_s - (time.monotonic() - start)))
        try:
            piece = sock.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            break
        if not piece:
            break
        data += piece
        if b"\r\n\r\n" in data:
            head, _, body = data.partition(b"\r\n\r\n")
            length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
            if length and len(body) >= length[0]:
                break
    return data, time.monotonic() - start


def status_of(answer):
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else None


def timed_health(port, limit_s):
    """GET /health on a fresh connection: (status or None when no answer came within limit_s, seconds)."""
    sock = connect(port)
    try:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer, took = read_answer(sock, limit_s)
    finally:
        sock.close()
    return status_of(answer), took


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


class HostileClients(unittest.TestCase):
    """Issue 51 point 2: slow, idle, greedy and departing clients cannot stop era_server. Every
    client is a raw socket on loopback; every wait is bounded."""

    def test_trickling_heads_neither_hold_health_nor_last(self):
        # More tricklers than --http-threads, each sending a head byte every 0.3 s: httplib's
        # per-recv timeout never expired, and with 2 threads /health waited behind them.
        server = Server("--http-threads", "2", "--header-timeout-s", "2", "-q")
        tricklers = []
        try:
            for _ in range(12):
                sock = connect(server.port)
                sock.sendall(b"GET /health HTTP/1.1\r\n")
                tricklers.append(sock)
            stop = threading.Event()

            def trickle():
                while not stop.is_set():
                    for sock in tricklers:
                        try:
                            sock.send(b"X")
                        except OSError:
                            pass
                    stop.wait(0.3)

            thread = threading.Thread(target=trickle, daemon=True)
            thread.start()
            time.sleep(0.5)
            status, took = timed_health(server.port, 3)
            print(f"\n/health with 12 tricklers on 2 --http-threads: {status} in {took * 1000:.1f} ms", file=sys.stderr)
            self.assertEqual(status, 200, f"/health unanswered after {took:.1f} s")
            self.assertLess(took, 2.0)
            # And the tricklers are cut off at --header-timeout-s (2 s from connecting): 408, closed.
            start = time.monotonic()
            answers = [read_answer(sock, 6)[0] for sock in tricklers]
            stop.set()
            thread.join(timeout=5)
            self.assertLess(time.monotonic() - start, 6)
            for answer in answers:
                self.assertIn(status_of(answer), (408, None), answer)
            self.assertTrue(any(b"--header-timeout-s" in a for a in answers), answers)
            # A client that connects and says nothing is closed at the same deadline.
            quiet = connect(server.port)
            answer, took = read_answer(quiet, 6)
            quiet.close()
            self.assertLess(took, 4.0)
            status, _ = timed_health(server.port, 3)
            self.assertEqual(status, 200)
        finally:
            for sock in tricklers:
                sock.close()
            self.assertEqual(server.stop(), 0)

    def test_connections_per_client_and_in_all_are_capped(self):
        server = Server("--max-connections-per-client", "3", "--max-connections", "4", "-q")
        held = []
        try:
            # Four connections from one client: one is refused at once. Each connection is admitted
            # on its own thread, so which of the four it is depends on scheduling (under load the
            # last one connected may be admitted first): the one that answers.
            socks = [connect(server.port) for _ in range(4)]
            held = list(socks)
            start = time.monotonic()
            readable, _, _ = select.select(socks, [], [], 3)
            self.assertEqual(len(readable), 1, "expected exactly one refused connection")
            extra = readable[0]
            held = [sock for sock in socks if sock is not extra]
            answer, _ = read_answer(extra, 3)
            took = time.monotonic() - start
            extra.close()
            self.assertEqual(status_of(answer), 503, answer)
            self.assertIn(b"--max-connections-per-client", answer)
            self.assertLess(took, 2.0)
            time.sleep(0.3)  # the refusing thread goes back to the pool
            # Another address is another client: one more fits, then the server is full.
            other = connect(server.port, source="127.0.0.2")
            held.append(other)
            other.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            answer, _ = read_answer(other, 3)
            self.assertEqual(status_of(answer), 200, answer)
            third = connect(server.port, source="127.0.0.3")
            answer, took = read_answer(third, 3)
            third.close()
            self.assertEqual(status_of(answer), 503, answer)
            self.assertIn(b"--max-connections", answer)
            # Closing one frees its place.
            held.pop(0).close()
            time.sleep(0.3)
            status, _ = timed_health(server.port, 3)
            self.assertEqual(status, 200)
        finally:
            for sock in held:
                sock.close()
            self.assertEqual(server.stop(), 0)

    def test_bodies_over_the_limit_are_refused_from_their_headers_or_as_they_pass_it(self):
        server = Server("--max-body-bytes", str(1 << 20), "-q")
        try:
            # Content-Length 2^63: 413 at once (httplib read and dropped the announced body first).
            sock = connect(server.port)
            start = time.monotonic()
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 9223372036854775808\r\n\r\n{")
            answer, _ = read_answer(sock, 5)
            took = time.monotonic() - start
            sock.close()
            print(f"\nContent-Length 2^63: {status_of(answer)} in {took * 1000:.1f} ms", file=sys.stderr)
            self.assertEqual(status_of(answer), 413, answer)
            self.assertIn(b"--max-body-bytes", answer)
            self.assertLess(took, 1.0)
            # A chunked body of 100 MB: 413 where it passes 1 MiB, without buffering the rest.
            rss_before = rss_kib(server.proc.pid)
            sock = connect(server.port)
            start = time.monotonic()
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
            chunk = b"%x\r\n" % 65536 + b"A" * 65536 + b"\r\n"
            sent = 0
            while sent < 100 << 20 and time.monotonic() - start < 30:
                if select.select([sock], [], [], 0)[0]:
                    break  # the answer came
                try:
                    sock.sendall(chunk)
                except OSError:
                    break
                sent += 65536
            answer, _ = read_answer(sock, 10)
            took = time.monotonic() - start
            sock.close()
            growth_mib = (rss_kib(server.proc.pid) - rss_before) / 1024
            print(f"chunked 100 MB: {status_of(answer)} in {took * 1000:.1f} ms after {sent >> 20} MiB sent; "
                  f"server RSS +{growth_mib:.1f} MiB", file=sys.stderr)
            self.assertEqual(status_of(answer), 413, answer[:300])
            self.assertIn(b"--max-body-bytes", answer)
            self.assertLess(growth_mib, 24)
            self.assertLess(took, 5.0)
            # The other framings httplib mishandles: each refused with its status, named.
            for head, status, needle in (
                    (b"Content-Length: ten\r\n", 400, b"Content-Length"),
                    (b"", 411, b"Content-Length"),
                    (b"Transfer-Encoding: gzip\r\n", 501, b"Transfer-Encoding"),
                    (b"Content-Length: 5\r\nContent-Encoding: gzip\r\n", 415, b"Content-Encoding"),
                    (b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 400, b"Transfer-Encoding")):
                sock = connect(server.port)
                sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n")
                answer, took = read_answer(sock, 3)
                sock.close()
                self.assertEqual(status_of(answer), status, (head, answer))
                self.assertIn(needle, answer.partition(b"\r\n\r\n")[2], answer)
                self.assertLess(took, 1.0)
            # A head over 64 KiB: 431, not a buffer that grows with it.
            sock = connect(server.port)
            sock.sendall(b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * (80 << 10) + b"\r\n\r\n")
            answer, _ = read_answer(sock, 3)
            sock.close()
            self.assertEqual(status_of(answer), 431, answer[:300])
            status, _ = timed_health(server.port, 3)
            self.assertEqual(status, 200)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_an_unstreamed_request_whose_client_left_is_cancelled(self):
        # A is answered; B waits in the queue behind it and its client leaves. B is cancelled when
        # its client goes (before, it ran to its end after A, for nobody). Independent of the
        # machine's speed: B waits at least as long as A generates.
        server = Server()
        try:
            body = json.dumps({"max_tokens": 1900, "era": {"ignore_eos": True},
                               "messages": [{"role": "user", "content": "Tell me a long story."}]}).encode()
            request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            a = connect(server.port, timeout=120)
            a.sendall(request)
            b = connect(server.port, timeout=120)
            b.sendall(request)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                _, got = server.json("GET", "/health")
                if got["queue"]["pending"] == 1 or not got["queue"]["busy"]:
                    break
                time.sleep(0.01)
            b.close()
            gone = "went away before the answer"
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not any(gone in l for l in server.log):
                time.sleep(0.02)
            self.assertTrue(any(gone in l for l in server.log), "".join(server.log))
            answer, _ = read_answer(a, 120)
            a.close()
            self.assertEqual(status_of(answer), 200, answer[:300])
            # B never runs: the worker is free as soon as A is answered.
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                _, got = server.json("GET", "/health")
                if not got["queue"]["busy"] and got["queue"]["pending"] == 0:
                    break
                time.sleep(0.01)
            self.assertEqual((got["queue"]["busy"], got["queue"]["pending"]), (False, 0), got)
            time.sleep(0.2)
            answered = [l for l in server.log if "POST /v1/chat/completions -> 200" in l]
            self.assertEqual(len(answered), 1, "".join(server.log))
        finally:
            self.assertEqual(server.stop(), 0)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    for flag in ("--server", "--infer", "--bundle", "--image", "--scratch"):
        parser.add_argument(flag, required=True)
    ARGS, rest = parser.parse_known_args()
    try:
        import openai  # noqa: F401
    except ImportError:
        sys.exit(f"{sys.executable} cannot import openai: run tools/setup.sh (it makes .venv-client from "
                 "tools/requirements-client.txt) or set -DERA_CLIENT_PYTHON")
    unittest.main(argv=[sys.argv[0], "-v", *rest])


if __name__ == "__main__":
    main()
