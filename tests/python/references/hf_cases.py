"""The Hugging Face parity cases: which tiny configurations transformers writes, and which images
each one is run on. One row per case, one (width, height) per image: adding a configuration or an
image size is one line here (a new case also needs its one-line TEST in tests/model/
test_hf_parity.cpp, which names the cases it checks).

Geometry is real (CLIP ViT patch 14 at 336 px: 24 x 24 patches per crop, LLaVA-NeXT's 336 px tiles);
widths and depths are tiny so the whole HF part stays fast.

Config keys are transformers' own (LlavaConfig / LlavaNextConfig, LlamaConfig text_config,
CLIPVisionConfig vision_config); `text` / `vision` are merged over the defaults below.
"""

VISION = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 3,
          "num_attention_heads": 2, "image_size": 336, "patch_size": 14,
          "projection_dim": 32, "hidden_act": "quick_gelu"}
TEXT = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1024,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 10000.0}

# LLaVA-1.5: square images agree between HF's processor and era's expand2square; non-square ones
# use LlavaImageProcessor(do_pad=True), HF's own expand2square (pad with the mean colour, centre).
IMAGES_15 = [(336, 336), (500, 500), (640, 480), (300, 560)]
# LLaVA-NeXT (anyres): different best resolutions, unpad on either axis, the 3-tile pinpoints.
IMAGES_NEXT = [(640, 480), (480, 640), (500, 500), (1000, 330), (300, 900)]
# LLaVA-OneVision: 384 px tiles, unpad on either axis, one image past the anyres_max_9 cap.
IMAGES_ONEVISION = [(640, 480), (300, 900), (1000, 330), (1150, 1530)]
# The OneVision widths (hf_cases.TEXT's, with GQA; SigLIP at its real geometry).
SIGLIP = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 3,
          "num_attention_heads": 2, "image_size": 384, "patch_size": 14,
          "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6, "vision_use_head": False}

CASES = {
    # GQA, llava-hf's defaults otherwise (feature layer -2, CLS dropped)
    "llava15_gqa": {"arch": "llava", "images": IMAGES_15, "seed": 1,
                    "text": {"num_key_value_heads": 2, "rms_norm_eps": 1e-5}},
    # tied embeddings, a positive feature layer, another RoPE base and epsilon, multi-head
    "llava15_tied_layer1": {"arch": "llava", "images": IMAGES_15[:2],
                            "text": {"tie_word_embeddings": True, "rope_theta": 1e6,
                                     "rms_norm_eps": 1e-6},
                            "top": {"vision_feature_layer": 1}},
    # the CLS token kept: 577 visual tokens
    "llava15_full": {"arch": "llava", "images": IMAGES_15[1:3],
                     "top": {"vision_feature_select_strategy": "full",
                             "vision_feature_layer": -1}},
    # several feature layers, concatenated along the hidden dim (projector in = 2 x 32)
    "llava15_layers": {"arch": "llava", "images": IMAGES_15[2:4],
                       "text": {"num_key_value_heads": 1},
                       "top": {"vision_feature_layer": [-3, -1]}},
    # NeXT with GQA, last feature layer, custom pinpoints in a non-default order
    "next_gqa_pins": {"arch": "llava_next", "images": IMAGES_NEXT,
                      "text": {"num_key_value_heads": 2, "rope_theta": 500000.0},
                      "top": {"vision_feature_layer": -1,
                              "image_grid_pinpoints": [[672, 336], [336, 672], [336, 1008],
                                                       [1008, 336], [672, 672]]}},
    # NeXT with a list of feature layers
    "next_layers": {"arch": "llava_next", "images": IMAGES_NEXT[:2],
                    "top": {"vision_feature_layer": [1, -2]}},
    # llava-v1.6-mistral-7b-hf's layout: a MistralConfig text model (GQA, rope_theta 1e6, no
    # sliding window) and the [INST] ... [/INST] prompt (era's template mistral_instruct)
    "next_mistral": {"arch": "llava_next", "images": IMAGES_NEXT[:2], "text_model": "mistral",
                     "prompt": "mistral_instruct",
                     "text": {"num_key_value_heads": 2, "rope_theta": 1e6,
                              "sliding_window": None}},
    # llava-v1.6-34b-hf's layout (Yi): <|im_start|> / <|im_end|> are pieces of the SentencePiece
    # model itself (user-defined symbols: ids 3 and 4 here, 6 and 7 in Yi's), marked special in the
    # tokenizer config; answers end at <|im_end|>; the prompt is what transformers'
    # apply_chat_template makes from the 34B chat template (era's template chatml)
    "next_yi_chatml": {"arch": "llava_next", "images": IMAGES_NEXT[2:4], "prompt": "chatml",
                       "sp_pieces": ["<|im_start|>", "<|im_end|>"],
                       "text": {"num_key_value_heads": 1, "rope_theta": 5e6}},
    # LLaVA-OneVision (SigLIP 384 px / patch 14, Qwen2 with GQA and q/k/v biases, rope_theta 1e6,
    # tied embeddings, the Qwen2-style byte-level BPE, the 36 real pinpoints, anyres_max_9): one
    # image per prompt, tiled; the 1150x1530 image picks a 4x3 grid whose unpadded 108x81 tokens
    # exceed 9 tiles' worth by > 1.1, so transformers downscales it (bilinear) to 93x70
    "onevision_images": {"arch": "llava_onevision", "images": IMAGES_ONEVISION, "seed": 3},
    # two images in one prompt: each padded to a square and seen as one crop, then a newline
    "onevision_two_images": {"arch": "llava_onevision", "images": [(640, 480), (300, 900)],
                             "images_per_prompt": 2, "seed": 4},
    # videos given as frame images, one per prompt: (frames, width, height). Each frame is resized
    # to 384 by the video processor (torchvision's uint8 antialiased bicubic; 384x384 is left as
    # is), normalised with its own (CLIP) statistics, its 27x27 tokens pooled to 14x14, and one
    # newline closes the video: 196 * frames + 1 visual tokens
    "onevision_video": {"arch": "llava_onevision", "images": [],
                        "videos": [(8, 640, 480), (3, 300, 500), (1, 384, 384)], "seed": 5},
    # Qwen2.5-VL (era_tools.make_tiny_qwen_vl's widths, the real geometry: patch 14, temporal 2,
    # 2x2 merge, 112 px windows, full attention in blocks 1 and 3 of 4, mrope [2, 3, 3]), saved
    # with Qwen2_5_VLProcessor (Qwen2VLImageProcessor: torchvision resize, smart_resize into
    # [min_pixels, max_pixels] in multiples of 28). One image per prompt; "pixels" gives
    # (min_pixels, max_pixels) passed to the processor for the image of that index (None: the
    # saved defaults 3136 / 1003520). 40x30 is upscaled by min_pixels to 84x56; the last image is
    # 640x480 again, squeezed by max_pixels 50176 to 252x168 (grid 12 x 18).
    "qwen_images": {"arch": "qwen2_5_vl", "seed": 21,
                    "images": [(640, 480), (300, 900), (1000, 330), (224, 224), (56, 56),
                               (40, 30), (640, 480)],
                    "pixels": {6: (12544, 50176)}},
    # two images in one prompt: two <|vision_start|><|image_pad|><|vision_end|> runs, grid_thw
    # rows in order, 3-D positions continuing after each image
    "qwen_two_images": {"arch": "qwen2_5_vl", "seed": 22, "images": [(640, 480), (300, 900)],
                        "images_per_prompt": 2},
    # videos as frame folders (frames, width, height, fps): the frames are given to the processor
    # as one video (do_sample_frames False, video_metadata fps), Qwen2VLVideoProcessor resizes them
    # with torchvision (smart_resize, video min_pixels 100352: 320x240 -> 392x280) and pairs them
    # (temporal patch 2); second_per_grid_ts = 2 / fps, temporal position step
    # tokens_per_second * int(second_per_grid_ts)
    "qwen_video": {"arch": "qwen2_5_vl", "seed": 23, "images": [],
                   "videos": [(4, 320, 240, 2.0), (3, 200, 300, 1.0)]},
}

QUESTION = "What is shown in this image?"
# The prompt text transformers is given, per template (era builds its own from the manifest).
PROMPTS = {"vicuna_v1": None,  # prompt_reference.vicuna_v1_prompt
           "mistral_instruct": "[INST] <image>\n{question} [/INST]",
           "chatml": None}  # processor.apply_chat_template with CHAT_TEMPLATE_34B
# llava-hf/llava-v1.6-34b-hf's chat template (images first, then text; "\n" after <|im_end|>).
CHAT_TEMPLATE_34B = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>\n' }}{% endfor %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{{ content['text'] }}{% endfor %}{{ '<|im_end|>' + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
GREEDY_TOKENS = 32
