#!/usr/bin/env python3
"""The exporter on the two text-model variants beside LLaMA/Vicuna: a Mistral decoder
(llava-v1.6-mistral-7b-hf: text_config.model_type "mistral", its [INST] template) and the NeXT-34B
layout (Yi: a LLaMA decoder with ChatML's <|im_start|> / <|im_end|> as added tokens, answers
ending in <|im_end|>). The tiny LLaVA-1.5 checkpoint is copied and its config / tokenizer files
edited into each variant, so only the fields under test differ.

    test_text_variants.py --checkpoint DIR [unittest options]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from era_tools.export_llava import make_manifest
from era_tools.hf_checkpoint import CheckpointError, load_checkpoint
from era_tools.prompt_template import TemplateError
from references.fixture_files import dump_json, read_json

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXPORTER = os.path.join(REPO, "tools", "export_llava.py")
CHECKPOINT = None  # set in main()

MISTRAL_CHAT_TEMPLATE = ("{% for message in messages %}{% if message['role'] == 'user' %}"
                         "{{ '[INST] ' }}{{ message['content'] }}{{ ' [/INST]' }}{% endif %}"
                         "{% endfor %}")
CHATML_CHAT_TEMPLATE = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
                        "{{ message['content'] }}{{ '<|im_end|>\\n' }}{% endfor %}")
IM_START_ID, IM_END_ID = 1002, 1003  # inside the tiny model's vocab_size 1024, after <pad>


class Variant(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="era-variants-")
        self.ckpt = os.path.join(self.tmp, "ckpt")
        shutil.copytree(CHECKPOINT, self.ckpt)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def edit(self, name, change):
        path = os.path.join(self.ckpt, name)
        obj = read_json(path) if os.path.isfile(path) else {}
        change(obj)
        dump_json(path, obj)

    def manifest(self, template="auto"):
        return make_manifest(load_checkpoint(self.ckpt, load_weights=False), "t", "float32", "math",
                             template)

    def make_mistral(self, **text_fields):
        def change(cfg):
            cfg.setdefault("text_config", {})["model_type"] = "mistral"
            cfg["text_config"].update(text_fields)
        self.edit("config.json", change)

    def make_yi(self, chat_template=CHATML_CHAT_TEMPLATE):
        def tokens(tc):
            tc.setdefault("added_tokens_decoder", {})
            for content, tid in (("<|im_start|>", IM_START_ID), ("<|im_end|>", IM_END_ID)):
                tc["added_tokens_decoder"][str(tid)] = {"content": content, "special": True}
            if chat_template is not None:
                tc["chat_template"] = chat_template
        self.edit("tokenizer_config.json", tokens)
        self.edit("generation_config.json", lambda g: g.update(eos_token_id=IM_END_ID))


class MistralTests(Variant):
    def test_absent_sliding_window_is_mistral_config_default(self):
        self.make_mistral()
        m = self.manifest()
        self.assertEqual(m["text"]["model_type"], "mistral")
        self.assertEqual(m["text"]["sliding_window"], 4096)  # MistralConfig's default
        self.assertEqual(m["prompt"]["template"], "mistral_instruct")
        self.assertEqual(m["prompt"]["system"], "")
        self.assertEqual(m["tokens"]["stop_ids"], [2])

    def test_null_sliding_window_is_none_and_set_one_is_kept(self):
        self.make_mistral(sliding_window=None)
        self.assertIsNone(self.manifest()["text"]["sliding_window"])
        self.make_mistral(sliding_window=512)
        self.assertEqual(self.manifest()["text"]["sliding_window"], 512)

    def test_bad_sliding_window_refused_naming_it(self):
        self.make_mistral(sliding_window=-3)
        with self.assertRaisesRegex(CheckpointError, "sliding_window"):
            self.manifest()

    def test_chat_template_picks_mistral_instruct(self):
        # a llama text config with a mistral chat template: the template text decides
        self.edit("tokenizer_config.json", lambda tc: tc.update(chat_template=MISTRAL_CHAT_TEMPLATE))
        self.assertEqual(self.manifest()["prompt"]["template"], "mistral_instruct")

    def test_unknown_text_model_type_refused_naming_field(self):
        self.edit("config.json", lambda cfg: cfg.setdefault("text_config", {}).update(model_type="gemma"))
        with self.assertRaisesRegex(CheckpointError, "text_config.model_type 'gemma'"):
            load_checkpoint(self.ckpt, load_weights=False)


class ChatmlTests(Variant):
    def test_yi_layout_defaults_to_llava_chatml_direct(self):
        self.make_yi()
        m = self.manifest()
        self.assertEqual(m["prompt"]["template"], "chatml_direct")
        self.assertEqual(m["prompt"]["system"], "Answer the questions.")
        self.assertEqual(m["tokens"]["stop_ids"], [2, IM_END_ID])
        added = {t["content"]: t["id"] for t in m["tokens"]["added_tokens"]}
        self.assertEqual(added["<|im_start|>"], IM_START_ID)
        self.assertEqual(added["<|im_end|>"], IM_END_ID)
        self.assertNotIn("<image>", added)  # the placeholder has its own path

    def test_without_chat_template_the_tokens_decide(self):
        self.make_yi(chat_template=None)
        self.assertEqual(self.manifest()["prompt"]["template"], "chatml_direct")

    def test_stop_at_im_end_even_without_generation_config(self):
        self.make_yi()
        os.remove(os.path.join(self.ckpt, "generation_config.json"))
        self.assertEqual(self.manifest()["tokens"]["stop_ids"], [2, IM_END_ID])

    def test_hf_chat_template_on_request(self):
        self.make_yi()
        m = self.manifest("chatml")
        self.assertEqual(m["prompt"]["template"], "chatml")
        self.assertEqual(m["prompt"]["system"], "")

    def test_chatml_without_the_tokens_refused(self):
        with self.assertRaisesRegex(TemplateError, r"<\|im_start\|>, <\|im_end\|>"):
            self.manifest("chatml_direct")

    def test_export_flag_and_refusal(self):
        out = os.path.join(self.tmp, "bundle")
        r = subprocess.run([sys.executable, EXPORTER, "--checkpoint", self.ckpt, "--out", out,
                            "--template", "chatml"], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("needs <|im_start|>, <|im_end|> as single tokens", r.stderr)
        self.assertFalse(os.path.exists(out))
        self.make_yi()
        r = subprocess.run([sys.executable, EXPORTER, "--checkpoint", self.ckpt, "--out", out,
                            "--template", "chatml"], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        m = read_json(os.path.join(out, "manifest.json"))
        self.assertEqual(m["prompt"]["template"], "chatml")
        self.assertIn(IM_END_ID, m["tokens"]["stop_ids"])


class VicunaUnchanged(Variant):
    def test_llama_checkpoint_keeps_vicuna_v1(self):
        m = self.manifest()
        self.assertEqual(m["prompt"]["template"], "vicuna_v1")
        self.assertEqual(m["prompt"]["user_role"], "USER")
        self.assertIsNone(m["text"]["sliding_window"])
        self.assertEqual(m["tokens"]["stop_ids"], [2])


def main():
    global CHECKPOINT
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint", required=True, help="tiny LLaVA-1.5 checkpoint folder")
    args, rest = p.parse_known_args()
    CHECKPOINT = args.checkpoint
    unittest.main(argv=[sys.argv[0]] + rest)


if __name__ == "__main__":
    main()
