"""SIGKILL trials against era_eval's crash safety (README, "Reliability").

    tools/kill_trials.py --era-eval build/era_eval --bundle BUNDLE [--trials 20] [--seed 0]

One uninterrupted run gives the reference answers. Then each trial starts the same run on a
fresh answers file, kills it with SIGKILL at a random moment (anywhere from model load to the
last write, and again during the resumes, which rewrite the file to retry error records), and
reruns until the run completes. A trial passes when the file then holds one well-formed line per
question, in question order, with exactly the reference answers, and nothing was lost: every
complete line seen after a kill is still there, byte for byte, at the end. Prints one line a trial
and a summary; exits 1 on any failed trial. Only the Python standard library.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def write_questions(path, n, bad_every):
    # Every bad_every-th question names a missing image: an error record, retried (and the file
    # rewritten) by every resume, so kills also land inside the atomic rewrite.
    with open(path, "w") as f:
        for i in range(n):
            image = "missing.png" if bad_every and i % bad_every == bad_every - 1 else ("sample.png" if i % 2 else "sample.jpg")
            f.write(json.dumps({"question_id": i, "image": image, "text": f"Question {i}: what is shown?"}) + "\n")


def lines(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    complete = data.split(b"\n")[:-1]  # the part after the last newline is a torn line, if any
    return complete


def key(line):
    r = json.loads(line)
    return r["question_id"], r.get("text")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--era-eval", required=True)
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--image-folder", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data"))
    ap.add_argument("--questions", type=int, default=16)
    ap.add_argument("--bad-every", type=int, default=5)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--kills-per-trial", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="era-kill-trials-")
    qpath = os.path.join(work, "questions.jsonl")
    write_questions(qpath, args.questions, args.bad_every)

    def command(answers):
        return [args.era_eval, "-m", args.bundle, "--questions", qpath, "--image-folder", args.image_folder,
                "--answers", answers, "-n", "8", "--ignore-eos"]

    ref = os.path.join(work, "reference.jsonl")
    start = time.monotonic()
    done = subprocess.run(command(ref), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    duration = time.monotonic() - start
    if done.returncode not in (0, 3):
        sys.exit(f"kill_trials: the reference run failed (exit {done.returncode}): {done.stderr.decode()[-500:]}")
    reference = [key(line) for line in lines(ref)]
    print(f"reference run: {len(reference)} records in {duration:.2f} s")

    kills = landed = failed = 0
    for trial in range(args.trials):
        answers = os.path.join(work, f"trial-{trial}.jsonl")
        seen = []  # complete lines observed after each kill: none may disappear
        problems = []
        for k in range(args.kills_per_trial):
            proc = subprocess.Popen(command(answers), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.0, duration))
            kills += 1
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                landed += 1
            proc.wait()
            seen.append(lines(answers))
        final = subprocess.run(command(answers), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if final.returncode not in (0, 3):
            problems.append(f"resume exit {final.returncode}: {final.stderr.decode()[-300:]}")
        end = lines(answers)
        with open(answers, "rb") as f:
            if not f.read().endswith(b"\n"):
                problems.append("file does not end with a complete line")
        try:
            got = [key(line) for line in end]
        except (ValueError, KeyError) as e:
            got = []
            problems.append(f"a line is not a record: {e}")
        if got != reference:
            problems.append(f"records differ from the reference ({len(got)} vs {len(reference)})")
        answered_end = {l for l in end if b'"text"' in l}
        for snapshot in seen:
            for l in snapshot:
                if b'"text"' in l and l not in answered_end:
                    problems.append(f"an answer written before a kill was lost: {l[:80]!r}")
                    break
        failed += bool(problems)
        print(f"trial {trial:3d}: {'ok' if not problems else 'FAILED: ' + '; '.join(problems)}")
    print(f"{args.trials} trials, {kills} kills ({landed} landed while era_eval ran), {failed} failed")
    if not failed:
        shutil.rmtree(work)  # kept when a trial failed: the files are the evidence
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
