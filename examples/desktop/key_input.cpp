#include "key_input.h"

namespace {

constexpr int kShiftBit = 1 << 16, kCapsBit = 1 << 17;  // GTK backend: modifier state << 16
constexpr int kQtShift = 0x02000000;                    // Qt backend: Qt::ShiftModifier
// Qt backend keys that are not text (Qt::Key_Escape, Key_Backspace, Key_Return, Key_Enter).
constexpr int kQtEscape = 0x01000000, kQtBackspace = 0x01000003, kQtReturn = 0x01000004, kQtEnter = 0x01000005;

void append_utf8(std::string& s, unsigned cp) {
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Removes the last UTF-8 character (not just its last byte).
void pop_utf8(std::string& s) {
  while (!s.empty()) {
    const unsigned char c = static_cast<unsigned char>(s.back());
    s.pop_back();
    if ((c & 0xC0) != 0x80) break;  // a lead byte or ASCII: the character is gone
  }
}

// The Unicode code point a keysym types, or 0.
unsigned code_point(int keysym) {
  if (keysym >= 0x20 && keysym <= 0x7E) return static_cast<unsigned>(keysym);
  if (keysym >= 0xA0 && keysym <= 0xFF) return static_cast<unsigned>(keysym);  // Latin-1
  return 0;
}

}  // namespace

KeyAction apply_key(int key, std::string& typing) {
  if (key < 0) return KeyAction::kNone;
  const int qt_key = key & ~kQtShift;
  if (qt_key == kQtEscape) return KeyAction::kEscape;
  if (qt_key == kQtReturn || qt_key == kQtEnter) return KeyAction::kSubmit;
  if (qt_key == kQtBackspace) key = 8;
  // Unicode keysyms (0x01000000 + U) do not fit the 16 bits OpenCV keeps below the modifiers:
  // they arrive whole, without modifier bits.
  if (key >= 0x01000000 && key <= 0x0110FFFF) {
    append_utf8(typing, static_cast<unsigned>(key - 0x01000000));
    return KeyAction::kEdited;
  }
  const int sym = key & 0xFFFF;
  const bool shift = (key & kShiftBit) != 0 || (key & kQtShift) != 0;
  const bool upper = shift != ((key & kCapsBit) != 0);
  switch (sym) {
    case 13:
    case 10:
    case 0xFF0D:
    case 0xFF8D: return KeyAction::kSubmit;  // Return, KP_Enter
    case 27:
    case 0xFF1B: return KeyAction::kEscape;
    case 8:
    case 127:
    case 0xFF08:  // BackSpace
      if (typing.empty()) return KeyAction::kNone;
      pop_utf8(typing);
      return KeyAction::kEdited;
    default: break;
  }
  unsigned cp = code_point(sym);
  if (cp == 0) return KeyAction::kNone;  // Shift itself, arrows, function keys...
  // A backend that reports the unshifted keysym with the Shift bit set: make the capital.
  if (upper && cp >= 'a' && cp <= 'z') cp -= 'a' - 'A';
  if (upper && cp >= 0xE0 && cp <= 0xFE && cp != 0xF7) cp -= 0x20;  // Latin-1 lower -> upper
  append_utf8(typing, cp);
  return KeyAction::kEdited;
}
