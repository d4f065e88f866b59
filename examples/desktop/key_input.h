#pragma once
// Typing in the window: one key code from cv::waitKeyEx() applied to the question being typed.
// Pure (no OpenCV), so the editing rules are unit-tested (tests/examples/test_key_input.cpp).
//
// Key codes: OpenCV's GTK backend gives the X keysym in the low 16 bits and the modifier state
// shifted left by 16 (bit 16 Shift, bit 17 Caps Lock); its Qt backend (Debian's) the keysym with
// Qt::ShiftModifier (0x02000000) or a Qt key (Key_Escape 0x01000000, Key_Return 0x01000004...);
// others plain ASCII (13 Enter, 8 Backspace, 27 Esc). Keysyms of Latin-1 letters equal their code points;
// keysyms 0x01000000 + U stand for Unicode U. waitKey() (without Ex) keeps only the low byte,
// which is why capitals typed with Shift and every non-ASCII letter were lost before.
#include <string>

enum class KeyAction {
  kNone,    // no key, or one that does nothing here
  kEdited,  // the typed text changed
  kSubmit,  // Enter: ask the typed question
  kEscape,  // Esc: cancel the answer being written, or quit
};

// Applies `key` (waitKeyEx's result; -1 = none) to `typing` (UTF-8).
KeyAction apply_key(int key, std::string& typing);
