// The desktop example's typing (examples/desktop/key_input.h): every key code applied, capitals
// from Shift or Caps Lock, non-ASCII letters as UTF-8, Backspace by character.
#include <gtest/gtest.h>

#include "examples/desktop/key_input.h"

namespace {

constexpr int kShift = 1 << 16, kCaps = 1 << 17;

std::string type(const std::vector<int>& keys) {
  std::string typing;
  for (const int k : keys) apply_key(k, typing);
  return typing;
}

TEST(DesktopKeys, EveryKeyOfAFastTypistArrives) {
  EXPECT_EQ(type({'W', 'h', 'a', 't', ' ', 'i', 's', '?'}), "What is?");
  std::string t = "ab";
  EXPECT_EQ(apply_key(-1, t), KeyAction::kNone);
  EXPECT_EQ(t, "ab");
}

TEST(DesktopKeys, ShiftAndCapsLockGiveCapitals) {
  EXPECT_EQ(type({'a' | kShift, 'b', 'c' | kCaps, 'd' | kShift | kCaps}), "AbCd");
  EXPECT_EQ(type({'A' | kShift, '1' | kShift}), "A1");  // an already-shifted keysym stays
  EXPECT_EQ(type({0xE9 | kShift}), "\xC3\x89");         // é + Shift = É
  EXPECT_EQ(type({'a' | 0x02000000, 'b'}), "Ab");       // the Qt backend's Shift
}

TEST(DesktopKeys, NonAsciiLettersAreUtf8AndBackspaceRemovesWholeCharacters) {
  EXPECT_EQ(type({'c', 'a', 'f', 0xE9}), "caf\xC3\xA9");   // Latin-1 keysym
  EXPECT_EQ(type({0x01000000 + 0x6F22}), "\xE6\xBC\xA2");  // 漢, a Unicode keysym
  EXPECT_EQ(type({'c', 0xE9, 0xFF08}), "c");               // GTK BackSpace
  EXPECT_EQ(type({'x', 0x01000000 + 0x1F600, 8}), "x");    // a 4-byte character, ASCII backspace
  EXPECT_EQ(type({'x', 'y', 0x01000003}), "x");            // Qt Key_Backspace
  std::string empty;
  EXPECT_EQ(apply_key(0xFF08, empty), KeyAction::kNone);
}

TEST(DesktopKeys, EnterAndEscapeAreActionsNotText) {
  std::string t = "q";
  for (const int enter : {13, 10, 0xFF0D, 0xFF8D, 0xFF0D | kShift}) EXPECT_EQ(apply_key(enter, t), KeyAction::kSubmit);
  for (const int esc : {27, 0xFF1B, 0x01000000}) EXPECT_EQ(apply_key(esc, t), KeyAction::kEscape);
  EXPECT_EQ(apply_key(0x01000004, t), KeyAction::kSubmit);  // Qt Key_Return
  EXPECT_EQ(apply_key(0xFFE1, t), KeyAction::kNone);        // Shift alone
  EXPECT_EQ(apply_key(0xFF51, t), KeyAction::kNone);        // an arrow
  EXPECT_EQ(t, "q");
}

}  // namespace
