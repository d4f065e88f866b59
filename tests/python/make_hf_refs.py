#!/usr/bin/env python3
"""Hugging Face parity fixture: tiny random checkpoints written BY TRANSFORMERS ITSELF (a second,
independent checkpoint writer beside tools/era_tools/make_tiny_llava.py), exported by era, and
transformers' own forward / generate as the reference.

    make_hf_refs.py --out DIR [--case NAME ...]

For every case of hf_cases.CASES:
  DIR/<case>/checkpoint/  LlavaForConditionalGeneration / LlavaNextForConditionalGeneration from
                          the case's config, save_pretrained (safetensors), with the processor
                          (LlavaProcessor + LlavaImageProcessorPil(do_pad) / LlavaNextProcessor +
                          LlavaNextImageProcessorPil, LlamaTokenizer built from the same
                          SentencePiece tokenizer.model make_tiny_llava trains) saved beside
  DIR/<case>/bundle/      era's export of that folder (float32)
  DIR/<case>/<k>/         per image k: image.png, and transformers' outputs for the vicuna_v1
                          prompt with that image:
      pixel_values.npy    [crops,3,S,S] float32, the processor's pixel_values
      logits.npy          [L,V] float32, the model's forward logits at every prompt position
      tokens.json         {"input_ids": the processor's ids (image tokens expanded),
                           "image_token_id", "visual_tokens", "greedy": 32 generate() tokens,
                           "eos_in_greedy", "min_greedy_margin"}
  DIR/<case>/case.json    {"arch", "bundle", "question", "images": [{"dir", "png", "width",
                           "height"}], "config": the case row}

Greedy decoding never stops at EOS on either side (era: stop_at_eos false; here eos_token_id is
cleared), so all 32 tokens are compared; whether EOS is among them is recorded. The smallest
top-1 / top-2 logit gap along the greedy path is recorded too: a near-tie would make the
comparison flaky, and the fixture refuses one below 1e-4 (pick another seed).
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import torch
from PIL import Image

from references import hf_cases
from era_tools import export_llava
from era_tools.make_tiny_llava import train_tokenizer
from references.fixture_files import save, write_json
from references.prompt_reference import vicuna_v1_prompt
from references.synthetic_image import synth

IMAGE_TOKEN_ID, PAD_TOKEN_ID = 1000, 1001  # right after the 1000 SentencePiece pieces
MIN_MARGIN = 1e-4  # ~100x the fp32 differences between implementations (logits ~1e-6 abs)


def hf_tokenizer(tokenizer_model, sp_pieces=()):
    """transformers' LlamaTokenizer converted from the SentencePiece model era reads, with
    <image> and <pad> appended as special tokens (ids 1000, 1001) and the model's own user-defined
    `sp_pieces` marked special (as llava-v1.6-34b-hf marks Yi's <|im_start|> / <|im_end|>). BOS is
    added as LLaVA does."""
    from transformers import LlamaTokenizer
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copyfile(tokenizer_model, os.path.join(tmp, "tokenizer.model"))
        # legacy=True: SentencePiece's dummy prefix after <image> ("▁" then "\n"), as original
        # LLaVA's tokenizer_image_token and era encode the text chunk after each image; with
        # legacy=False transformers drops that "▁" and the prompts differ by one token.
        tok = LlamaTokenizer.from_pretrained(tmp, add_bos_token=True, add_eos_token=False,
                                             legacy=True)
    pieces = [tok.convert_tokens_to_ids(p) for p in sp_pieces]
    tok.add_tokens(["<image>"], special_tokens=True)  # ids in the order added: <image> first
    tok.add_special_tokens({"pad_token": "<pad>"})
    if sp_pieces:  # already in the vocabulary: marked special, ids unchanged
        tok.add_special_tokens({"additional_special_tokens": list(sp_pieces)})
    got = (tok.convert_tokens_to_ids("<image>"), tok.convert_tokens_to_ids("<pad>"))
    if len(tok) != 1002 or got != (IMAGE_TOKEN_ID, PAD_TOKEN_ID):
        raise SystemExit(f"make_hf_refs: unexpected tokenizer ids {got}, size {len(tok)}")
    if [tok.convert_tokens_to_ids(p) for p in sp_pieces] != pieces or 0 in pieces:
        raise SystemExit(f"make_hf_refs: the pieces {list(sp_pieces)} are not single SentencePiece ids")
    return tok


def build(case, tok):
    import transformers as tf
    row = hf_cases.CASES[case]
    text_cls = {"llama": tf.LlamaConfig, "mistral": tf.MistralConfig}[row.get("text_model", "llama")]
    text = text_cls(**dict(hf_cases.TEXT, **row.get("text", {})))
    vision = tf.CLIPVisionConfig(**dict(hf_cases.VISION, **row.get("vision", {})))
    image_token_id, pad_token_id = IMAGE_TOKEN_ID, PAD_TOKEN_ID
    top = dict(row.get("top", {}))
    strategy = top.get("vision_feature_select_strategy", "default")
    if row["arch"] == "llava":
        cfg = tf.LlavaConfig(text_config=text, vision_config=vision, image_token_index=image_token_id,
                             pad_token_id=pad_token_id, **top)
        model_cls, proc_cls = tf.LlavaForConditionalGeneration, tf.LlavaProcessor
        image_processor = tf.LlavaImageProcessorPil(
            size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336}, do_pad=True)
    else:
        cfg = tf.LlavaNextConfig(text_config=text, vision_config=vision,
                                 image_token_index=image_token_id, pad_token_id=pad_token_id, **top)
        model_cls, proc_cls = tf.LlavaNextForConditionalGeneration, tf.LlavaNextProcessor
        image_processor = tf.LlavaNextImageProcessorPil(
            size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336},
            image_grid_pinpoints=cfg.image_grid_pinpoints)
    # Wider than transformers' 0.02 init so greedy choices are not near-ties.
    cfg.text_config.initializer_range = 0.2
    cfg.vision_config.initializer_range = 0.2
    cfg.initializer_range = 0.2
    # a case may pin its own seed ("seed") when the default one gives a greedy near-tie
    torch.manual_seed(row.get("seed", sum(map(ord, case))))
    model = model_cls(cfg).eval()
    # CLS kept ("full") adds one token per crop to the processor's expansion.
    processor = proc_cls(image_processor=image_processor, tokenizer=tok, patch_size=14,
                         vision_feature_select_strategy=strategy, image_token="<image>",
                         num_additional_image_tokens=1)
    return model, processor


def build_onevision(case):
    """LlavaOnevisionForConditionalGeneration at hf_cases' widths with the real geometry, its
    processor (LlavaOnevisionImageProcessorPil over the 36 real pinpoints, the Qwen2-style
    tokenizer of tools/era_tools/data/qwen2_tokenizer, llava-hf's OneVision chat template)."""
    import transformers as tf
    from era_tools.make_tiny_onevision import ONEVISION_CHAT_TEMPLATE, PINPOINTS, TOKENIZER_DIR
    row = hf_cases.CASES[case]
    tok = tf.AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    vocab = -(-len(tok) // 64) * 64
    text = tf.Qwen2Config(**dict(hf_cases.TEXT, num_key_value_heads=2, vocab_size=vocab, rope_theta=1e6,
                                 tie_word_embeddings=True, use_sliding_window=False,
                                 max_position_embeddings=32768))
    cfg = tf.LlavaOnevisionConfig(
        text_config=text.to_dict(), vision_config=tf.SiglipVisionConfig(**hf_cases.SIGLIP).to_dict(),
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        video_token_index=tok.convert_tokens_to_ids("<video>"), projector_hidden_act="gelu",
        vision_feature_select_strategy="full", vision_feature_layer=-1,
        vision_aspect_ratio="anyres_max_9", image_grid_pinpoints=PINPOINTS, tie_word_embeddings=True)
    torch.manual_seed(row.get("seed", sum(map(ord, case))))
    model = tf.LlavaOnevisionForConditionalGeneration(cfg).eval()
    with torch.no_grad():  # wider than transformers' 0.02 init: no greedy near-ties
        for name, p in model.named_parameters():
            if p.dim() >= 2 and "norm" not in name:
                p.normal_(0.0, 0.2 if "language_model" in name else 0.05)
            elif "image_newline" in name:
                p.normal_(0.0, 0.5)
    processor = tf.LlavaOnevisionProcessor(
        image_processor=tf.LlavaOnevisionImageProcessorPil(image_grid_pinpoints=PINPOINTS,
                                                          image_mean=[0.5] * 3, image_std=[0.5] * 3),
        video_processor=tf.LlavaOnevisionVideoProcessor(), tokenizer=tok, num_image_tokens=729,
        vision_feature_select_strategy="full", chat_template=ONEVISION_CHAT_TEMPLATE)
    return model, processor, tok


def checked_greedy(gen, prompt_length, out):
    """generate()'s answer tokens and each step's top-2 logit margin; refuses a short answer or a
    near-tie (the comparison would be flaky)."""
    greedy = gen.sequences[0, prompt_length:].tolist()
    if len(greedy) != hf_cases.GREEDY_TOKENS:
        raise SystemExit(f"make_hf_refs: {out}: generate gave {len(greedy)} tokens")
    margins = [float(s[0].topk(2).values[0] - s[0].topk(2).values[1]) for s in gen.scores]
    if min(margins) < MIN_MARGIN:
        raise SystemExit(f"make_hf_refs: {out}: greedy step {int(np.argmin(margins))} is a near-tie "
                         f"({min(margins):.2g}): the comparison would be flaky")
    return greedy, margins


def references(model, processor, image, prompt, out, image_token_id=IMAGE_TOKEN_ID,
               pad_token_id=PAD_TOKEN_ID, video=None):
    """transformers' outputs for `prompt` with `image` (one PIL image, or a list for a
    multi-image prompt), or with `video` (its frames, uint8 [F, H, W, 3]; `image_token_id` is
    then the video token's id)."""
    os.makedirs(out, exist_ok=True)
    if video is not None:
        inputs = processor(videos=[video], text=prompt, return_tensors="pt")
        pixels = inputs["pixel_values_videos"]  # [1, frames, 3, S, S]
    else:
        inputs = processor(images=image, text=prompt, return_tensors="pt")
        pixels = inputs["pixel_values"]
    if pixels.dim() == 5:  # NeXT / OneVision: [images, crops, 3, S, S]; one image's crops, or
        pixels = pixels.flatten(0, 1)  # one crop each for several (none padded: same counts)
    ids = inputs["input_ids"][0].tolist()
    with torch.no_grad():
        logits = model(**inputs).logits[0].float()
        gen = model.generate(**inputs, max_new_tokens=hf_cases.GREEDY_TOKENS, do_sample=False,
                             eos_token_id=None, pad_token_id=pad_token_id,
                             output_scores=True, return_dict_in_generate=True)
    greedy, margins = checked_greedy(gen, len(ids), out)
    save(out, "pixel_values.npy", pixels.float())
    save(out, "logits.npy", logits)
    extra = {}
    if getattr(processor, "video_processor", None) is not None:  # OneVision: Qwen2's tokenizer
        # the prompt's ids with one id per placeholder, by the tokenizer alone (adjacent images
        # make one run of image ids in input_ids, which cannot be split back without the counts)
        extra["prompt_ids"] = processor.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    write_json(out, "tokens.json", {**extra,
        "input_ids": ids, "image_token_id": image_token_id,
        "visual_tokens": sum(1 for i in ids if i == image_token_id), "greedy": greedy,
        "eos_in_greedy": 2 in greedy, "min_greedy_margin": min(margins)})


def case_folders(case, out):
    """(folder, checkpoint, bundle) of a case, the folder emptied."""
    folder = os.path.join(out, case)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    return folder, os.path.join(folder, "checkpoint"), os.path.join(folder, "bundle")


def exported_onevision(case, out):
    """A OneVision case's checkpoint saved by transformers and exported by era: (folder,
    checkpoint, bundle, model, processor, tokenizer)."""
    folder, ckpt, bundle = case_folders(case, out)
    model, processor, tok = build_onevision(case)
    model.save_pretrained(ckpt, safe_serialization=True)
    processor.save_pretrained(ckpt)
    if export_llava.main(["--checkpoint", ckpt, "--out", bundle, "--dtype", "float32"]) != 0:
        raise SystemExit(f"make_hf_refs: era could not export {ckpt}")
    return folder, ckpt, bundle, model, processor, tok


def make_onevision_case(case, out):
    """A OneVision case: the prompt is transformers' own chat template (era's request sends that
    text with use_template off); images go one per prompt, or `images_per_prompt` at a time."""
    start = time.time()
    row = hf_cases.CASES[case]
    folder, ckpt, bundle, model, processor, tok = exported_onevision(case, out)
    per_prompt = row.get("images_per_prompt", 1)
    prompt = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}] * per_prompt
          + [{"type": "text", "text": hf_cases.QUESTION}]}], add_generation_prompt=True)
    pngs = []
    for k, (w, h) in enumerate(row["images"]):
        png = os.path.join(folder, f"image{k}.png")
        Image.fromarray(synth(w, h, seed=k)).save(png)
        pngs.append({"png": png, "width": w, "height": h})
    prompts = []
    for k in range(0, len(pngs), per_prompt):
        group = pngs[k:k + per_prompt]
        d = os.path.join(folder, str(len(prompts)))
        pil = [Image.open(g["png"]).convert("RGB") for g in group]
        # nested ([[a, b]]): one prompt's images, which transformers pads to squares untiled (a
        # flat list would be several single-image prompts, each tiled)
        references(model, processor, [pil] if per_prompt > 1 else pil[0], prompt, d,
                   image_token_id=tok.convert_tokens_to_ids("<image>"),
                   pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"))
        prompts.append({"dir": d, "png": group[0]["png"], "pngs": [g["png"] for g in group],
                        "width": group[0]["width"], "height": group[0]["height"]})
    write_json(folder, "case.json", {"arch": row["arch"], "bundle": bundle, "checkpoint": ckpt,
                                     "question": hf_cases.QUESTION, "prompt": prompt,
                                     "raw_prompt": True, "images": prompts,
                                     "config": {k: v for k, v in row.items() if k != "images"}})
    print(f"make_hf_refs: {case}: {len(prompts)} prompt(s) in {time.time() - start:.1f} s")


def make_onevision_video_case(case, out):
    """A OneVision video case: each video is a folder of frame PNGs (era reads it with
    Video::from_folder), one video per prompt, transformers' chat template as the prompt."""
    start = time.time()
    row = hf_cases.CASES[case]
    folder, ckpt, bundle, model, processor, tok = exported_onevision(case, out)
    prompt = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": hf_cases.QUESTION}]}],
        add_generation_prompt=True)
    video_id = tok.convert_tokens_to_ids("<video>")
    prompts = []
    for k, (frames, w, h) in enumerate(row["videos"]):
        frames_dir = os.path.join(folder, f"video{k}")
        os.makedirs(frames_dir)
        arrays = []
        for f in range(frames):
            pixels = synth(w, h, seed=100 * k + f)
            Image.fromarray(pixels).save(os.path.join(frames_dir, f"frame_{f:04d}.png"))
            arrays.append(pixels)
        d = os.path.join(folder, str(k))
        references(model, processor, None, prompt, d, image_token_id=video_id,
                   pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"), video=np.stack(arrays))
        prompts.append({"dir": d, "video_dir": frames_dir, "frames": frames, "width": w, "height": h})
    write_json(folder, "case.json", {"arch": row["arch"], "bundle": bundle, "checkpoint": ckpt,
                                     "question": hf_cases.QUESTION, "prompt": prompt,
                                     "raw_prompt": True, "images": prompts,
                                     "config": {k: v for k, v in row.items() if k != "images"}})
    print(f"make_hf_refs: {case}: {len(prompts)} video(s) in {time.time() - start:.1f} s")


def exported_qwen(case, out):
    """A Qwen2.5-VL case's checkpoint made and saved by transformers (era_tools.make_tiny_qwen_vl,
    language-model weights at std 0.2 so greedy decoding has no near-ties) and exported by era:
    (folder, checkpoint, bundle, model, processor, tokenizer)."""
    from era_tools.make_tiny_qwen_vl import build as build_qwen
    folder, ckpt, bundle = case_folders(case, out)
    row = hf_cases.CASES[case]
    model, processor, tok = build_qwen(seed=row.get("seed", sum(map(ord, case))), std_text=0.2)
    model.save_pretrained(ckpt, safe_serialization=True)
    processor.save_pretrained(ckpt)
    if export_llava.main(["--checkpoint", ckpt, "--out", bundle, "--dtype", "float32"]) != 0:
        raise SystemExit(f"make_hf_refs: era could not export {ckpt}")
    return folder, ckpt, bundle, model, processor, tok


def qwen_references(model, processor, prompt, out, images=None, video=None, fps=None,
                    pixels=None):
    """transformers' outputs for a Qwen2.5-VL prompt with `images` (PIL images, one prompt) or
    `video` (uint8 [F, H, W, 3] frames, given with fps metadata). pixels: (min_pixels,
    max_pixels) for the processor call, or None. Returns what case.json records per prompt."""
    os.makedirs(out, exist_ok=True)
    kwargs = {}
    if pixels is not None:  # the processor honours them only as a pair
        kwargs.update(min_pixels=pixels[0], max_pixels=pixels[1])
    if video is not None:
        meta = [{"fps": fps, "total_num_frames": len(video), "frames_indices": list(range(len(video)))}]
        inputs = processor(videos=[video], text=prompt, return_tensors="pt", do_sample_frames=False,
                           video_metadata=meta, **kwargs)
        pixel_values, grid = inputs["pixel_values_videos"], inputs["video_grid_thw"]
        token_id = model.config.video_token_id
    else:
        inputs = processor(images=images, text=prompt, return_tensors="pt", **kwargs)
        pixel_values, grid = inputs["pixel_values"], inputs["image_grid_thw"]
        token_id = model.config.image_token_id
    ids = inputs["input_ids"]
    with torch.no_grad():
        position_ids, deltas = model.model.get_rope_index(
            ids, inputs["mm_token_type_ids"], image_grid_thw=inputs.get("image_grid_thw"),
            video_grid_thw=inputs.get("video_grid_thw"),
            second_per_grid_ts=inputs.get("second_per_grid_ts"),
            attention_mask=inputs["attention_mask"])
        model.model.rope_deltas = None
        logits = model(**inputs).logits[0].float()
        model.model.rope_deltas = None
        gen = model.generate(**inputs, max_new_tokens=hf_cases.GREEDY_TOKENS, do_sample=False,
                             eos_token_id=None, pad_token_id=processor.tokenizer.pad_token_id,
                             output_scores=True, return_dict_in_generate=True)
    ids = ids[0].tolist()
    greedy, margins = checked_greedy(gen, len(ids), out)
    save(out, "pixel_values.npy", pixel_values.float())
    save(out, "logits.npy", logits)
    np.save(os.path.join(out, "position_ids.npy"), position_ids[:, 0].numpy().astype(np.int64))
    eos = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    record = {"grid_thw": grid.tolist()}
    if video is not None:
        vp = processor.video_processor.size
        lo, hi = pixels if pixels is not None else (vp["shortest_edge"], vp["longest_edge"])
        record.update(fps=fps, second_per_grid_ts=[float(x) for x in inputs["second_per_grid_ts"]],
                      min_pixels=lo, max_pixels=hi)
    write_json(out, "tokens.json", {
        "prompt_ids": processor.tokenizer(prompt, add_special_tokens=False)["input_ids"],
        "input_ids": ids, "image_token_id": token_id,
        "visual_tokens": sum(1 for i in ids if i == token_id), "greedy": greedy,
        "eos_in_greedy": eos in greedy, "min_greedy_margin": min(margins),
        "rope_delta": int(deltas.reshape(-1)[0]), **record})
    return record


def make_qwen_case(case, out):
    """A Qwen2.5-VL case: the prompt is transformers' chat template text (raw prompt); images one
    per prompt or `images_per_prompt` at a time; or videos as frame-PNG folders, one per prompt.
    Per prompt dir: pixel_values.npy ([Np, 1176] float32, the processor's pixel_values or
    pixel_values_videos), position_ids.npy (int64 [3, L], model.model.get_rope_index), logits.npy,
    tokens.json (with "grid_thw", the video's "fps" / "second_per_grid_ts")."""
    start = time.time()
    row = hf_cases.CASES[case]
    folder, ckpt, bundle, model, processor, tok = exported_qwen(case, out)
    prompts = []
    if "videos" in row:
        prompt = processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": hf_cases.QUESTION}]}],
            add_generation_prompt=True)
        for k, (frames, w, h, fps) in enumerate(row["videos"]):
            frames_dir = os.path.join(folder, f"video{k}")
            os.makedirs(frames_dir)
            arrays = []
            for f in range(frames):
                pixels = synth(w, h, seed=100 * k + f)
                Image.fromarray(pixels).save(os.path.join(frames_dir, f"frame_{f:04d}.png"))
                arrays.append(pixels)
            d = os.path.join(folder, str(k))
            rec = qwen_references(model, processor, prompt, d, video=np.stack(arrays), fps=fps)
            prompts.append({"dir": d, "video_dir": frames_dir, "frames": frames, "width": w,
                            "height": h, **rec})
    else:
        per_prompt = row.get("images_per_prompt", 1)
        prompt = processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "image"}] * per_prompt
              + [{"type": "text", "text": hf_cases.QUESTION}]}], add_generation_prompt=True)
        pngs = []
        for k, (w, h) in enumerate(row["images"]):
            png = os.path.join(folder, f"image{k}.png")
            Image.fromarray(synth(w, h, seed=k)).save(png)
            pngs.append({"png": png, "width": w, "height": h})
        for k in range(0, len(pngs), per_prompt):
            group = pngs[k:k + per_prompt]
            d = os.path.join(folder, str(len(prompts)))
            pixels = row.get("pixels", {}).get(k)
            pil = [Image.open(g["png"]).convert("RGB") for g in group]
            rec = qwen_references(model, processor, prompt, d, images=pil, pixels=pixels)
            ip = processor.image_processor.size
            lo, hi = pixels if pixels is not None else (ip["shortest_edge"], ip["longest_edge"])
            prompts.append({"dir": d, "png": group[0]["png"], "pngs": [g["png"] for g in group],
                            "width": group[0]["width"], "height": group[0]["height"],
                            "min_pixels": lo, "max_pixels": hi, **rec})
    write_json(folder, "case.json", {"arch": row["arch"], "bundle": bundle, "checkpoint": ckpt,
                                     "question": hf_cases.QUESTION, "prompt": prompt,
                                     "raw_prompt": True, "images": prompts,
                                     "config": {k: v for k, v in row.items()
                                                if k not in ("images", "pixels")}})
    print(f"make_hf_refs: {case}: {len(prompts)} prompt(s) in {time.time() - start:.1f} s")


def make_case(case, out):
    if hf_cases.CASES[case]["arch"] == "qwen2_5_vl":
        return make_qwen_case(case, out)
    if "videos" in hf_cases.CASES[case]:
        return make_onevision_video_case(case, out)
    if hf_cases.CASES[case]["arch"] == "llava_onevision":
        return make_onevision_case(case, out)
    start = time.time()
    row = hf_cases.CASES[case]
    folder, ckpt, bundle = case_folders(case, out)
    # one tokenizer per case: the cases are separate ctest fixtures that may run in parallel
    tokenizer_model = os.path.join(folder, "tokenizer.model")
    train_tokenizer(tokenizer_model, row.get("sp_pieces", ()))
    tok = hf_tokenizer(tokenizer_model, row.get("sp_pieces", ()))
    model, processor = build(case, tok)
    template = row.get("prompt", "vicuna_v1")
    if template == "chatml":  # saved with the checkpoint, as llava-hf's 34B has it
        processor.chat_template = hf_cases.CHAT_TEMPLATE_34B
    model.save_pretrained(ckpt, safe_serialization=True)
    processor.save_pretrained(ckpt)
    if not os.path.isfile(os.path.join(ckpt, "tokenizer.model")):
        shutil.copyfile(tokenizer_model, os.path.join(ckpt, "tokenizer.model"))
    # The exporter's default for a ChatML checkpoint is LLaVA's evaluation template chatml_direct;
    # transformers' chat template is era's "chatml", asked for by name.
    pick = ["--template", "chatml"] if template == "chatml" else []
    if export_llava.main(["--checkpoint", ckpt, "--out", bundle, "--dtype", "float32"] + pick) != 0:
        raise SystemExit(f"make_hf_refs: era could not export {ckpt}")
    if template == "vicuna_v1":
        prompt = vicuna_v1_prompt(hf_cases.QUESTION)
    elif template == "chatml":
        prompt = processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": hf_cases.QUESTION}]}],
            add_generation_prompt=True)
    else:
        prompt = hf_cases.PROMPTS[template].format(question=hf_cases.QUESTION)
    images = []
    for k, (w, h) in enumerate(row["images"]):
        d = os.path.join(folder, str(k))
        os.makedirs(d, exist_ok=True)
        png = os.path.join(d, "image.png")
        Image.fromarray(synth(w, h, seed=k)).save(png)
        references(model, processor, Image.open(png).convert("RGB"), prompt, d)
        images.append({"dir": d, "png": png, "width": w, "height": h})
    write_json(folder, "case.json", {"arch": row["arch"], "bundle": bundle, "checkpoint": ckpt,
                                     "question": hf_cases.QUESTION, "prompt": prompt, "images": images,
                                     "config": {k: v for k, v in row.items() if k != "images"}})
    print(f"make_hf_refs: {case}: {len(images)} image(s) in {time.time() - start:.1f} s")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--case", action="append", choices=sorted(hf_cases.CASES))
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for case in args.case or hf_cases.CASES:
        make_case(case, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
