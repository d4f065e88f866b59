"""Load and validate an HF checkpoint folder of any family era exports: LLaVA-1.5
(`LlavaForConditionalGeneration`, model_type "llava"), LLaVA-NeXT / v1.6
(`LlavaNextForConditionalGeneration`, "llava_next"), LLaVA-OneVision
(`LlavaOnevisionForConditionalGeneration`, "llava_onevision") and Qwen2.5-VL
(`Qwen2_5_VLForConditionalGeneration`, "qwen2_5_vl").

The front door of the checkpoint readers: the family registry (era_tools.families) picks the
family by config.json's model_type, and the family module reads the folder with the shared
readers of checkpoint_base. What is read:
  config.json               with HF's class defaults filled in for every field we use (the llava-hf
                            configs only store the fields that differ from LlamaConfig /
                            CLIPVisionConfig defaults, so reading them naively gives wrong dims)
  preprocessor_config.json  the image processor the family's preprocessing reproduces (optional:
                            the family's defaults); for NeXT its image_grid_pinpoints, checked
                            against config.json
  tokenizer                 SentencePiece tokenizer.model (LLaMA, Mistral) or Qwen2's byte-level
                            BPE tokenizer.json, with the added tokens and chat template
  weights                   see safetensors_io.load_weights_folder, in each family's name
                            layouts, mapped to one canonical naming per part (the modules' own)

Every tensor the exported model needs is checked for presence and shape against the config, and
errors name the tensor as it is spelled in the checkpoint. Everything a user can get wrong raises
`CheckpointError` (or `WeightsFileError` for unreadable weight files) with a message naming the
file or tensor.
"""
from .checkpoint_base import (CLIP_MEAN, CLIP_STD, ERA_RESAMPLE, IMAGE_MODES,  # noqa: F401
                              PIL_RESAMPLE_IDS, PIL_RESAMPLE_NAMES, CheckpointError,
                              LlavaCheckpoint, LlavaConfig, Preprocessor, TextConfig,
                              VisionConfig, WeightsFileError, checkpoint_name, parse_preprocessor,
                              split_state_dict)
from .families import (expected_shapes, load_checkpoint, load_config,  # noqa: F401
                       load_preprocessor, with_image_mode)
from .families import get as family

# LlavaNextConfig's default image_grid_pinpoints (the llava_next family's)
NEXT_DEFAULT_PINPOINTS = family("llava-next").NEXT_DEFAULT_PINPOINTS

__all__ = ["CheckpointError", "WeightsFileError", "LlavaCheckpoint", "LlavaConfig", "TextConfig",
           "VisionConfig", "Preprocessor", "parse_preprocessor", "with_image_mode", "IMAGE_MODES",
           "load_config", "load_checkpoint", "load_preprocessor", "expected_shapes",
           "split_state_dict", "checkpoint_name", "NEXT_DEFAULT_PINPOINTS", "CLIP_MEAN",
           "CLIP_STD"]
