#pragma once
// The fuzz targets: one function per parser that takes bytes from outside era. Each must return
// normally for every input; an era::Error is the parser refusing the input (the expected outcome
// for most fuzz inputs) and is swallowed. Anything else (another exception type, a crash, a
// sanitizer report, a hang, a huge allocation) is a finding.
//
// The same functions run twice: under libFuzzer (tools/fuzz.sh; one binary a target, through
// libfuzzer_entry.cpp) and, in every build, as ctest tests that replay the committed corpus
// (tests/fuzz/corpus/<target>/, seeds plus every input a fuzzing run found) through
// replay_main.cpp.
#include <cstddef>
#include <cstdint>

namespace era::fuzz {

int manifest(const uint8_t* data, size_t size);         // bundle manifest.json
int question_line(const uint8_t* data, size_t size);    // one line of a question JSONL file
int image_header(const uint8_t* data, size_t size);     // image header probe, then decode
int npy(const uint8_t* data, size_t size);              // .npy arrays
int tokenizer_model(const uint8_t* data, size_t size);  // SentencePiece tokenizer.model
int tokenizer_json(const uint8_t* data, size_t size);   // Hugging Face tokenizer.json (byte-level BPE)
int era_config(const uint8_t* data, size_t size);       // --era-config JSON
int safetensors(const uint8_t* data, size_t size);      // a Hugging Face model.safetensors weights file
int openai_request(const uint8_t* data, size_t size);   // era_server's request body (built with era_serving)

}  // namespace era::fuzz
