#include "util/error_text.h"

#include <gtest/gtest.h>

namespace era {
namespace {

TEST(ErrorSummary, TorchScriptFailureGivesTheExceptionLine) {
  const std::string text =
      "The following operation failed in the TorchScript interpreter.\n"
      "Traceback of TorchScript, serialized code (most recent call last):\n"
      "  File \"code/__torch__/llava_model.py\", line 40, in forward\n"
      "    x = torch.linear(input, weight)\n"
      "        ~~~~~~~~~~~~ <--- HERE\n"
      "RuntimeError: \"addmm_impl_cpu_\" not implemented for 'Half'\n";
  EXPECT_EQ(error_summary(text), "RuntimeError: \"addmm_impl_cpu_\" not implemented for 'Half'");
}

TEST(ErrorSummary, OtherTextsGiveTheirFirstLine) {
  EXPECT_EQ(error_summary("\n  shape mismatch [2, 3] vs [3, 3]\nException raised from foo at bar.cpp:12\n"),
            "shape mismatch [2, 3] vs [3, 3]");
  EXPECT_EQ(error_summary(""), "");
  // A TorchScript header without an exception line keeps the header rather than inventing one.
  EXPECT_EQ(error_summary("The following operation failed in the TorchScript interpreter.\nTraceback:\n  x\n"),
            "The following operation failed in the TorchScript interpreter.");
}

}  // namespace
}  // namespace era
