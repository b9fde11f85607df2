#include "topology/xml.h"

#include <cctype>
#include <cstdint>

#include "topology/graph.h"

namespace gyre::topology {

namespace {

bool nameStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool nameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':' || c == '-' ||
         c == '.';
}

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class Reader {
 public:
  Reader(std::string_view text, const std::string& source) : s_(text), source_(source) {}

  XmlElement document() {
    skipProlog();
    if (atEnd()) fail("no root element (empty file?)");
    if (peek() != '<') fail("text outside the root element");
    XmlElement root = element(0);
    skipMisc();
    if (!atEnd()) fail(peek() == '<' ? "a second root element" : "text after the root element");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw TopologyError(source_, line_, what);
  }
  bool atEnd() const { return pos_ >= s_.size(); }
  char peek() const { return atEnd() ? '\0' : s_[pos_]; }
  bool startsWith(std::string_view p) const { return s_.substr(pos_, p.size()) == p; }
  void advance(size_t n = 1) {
    for (size_t i = 0; i < n && !atEnd(); ++i)
      if (s_[pos_++] == '\n') ++line_;
  }
  void skipSpace() {
    while (!atEnd() && std::isspace(static_cast<unsigned char>(peek()))) advance();
  }
  // Comments, processing instructions (the declaration) and DOCTYPE.
  bool skipOneMisc() {
    if (startsWith("<!--")) {
      const int start = line_;
      const size_t end = s_.find("-->", pos_ + 4);
      if (end == std::string_view::npos) {
        line_ = start;
        fail("comment is never closed");
      }
      advance(end + 3 - pos_);
      return true;
    }
    if (startsWith("<?")) {
      const size_t end = s_.find("?>", pos_ + 2);
      if (end == std::string_view::npos) fail("<? ... ?> is never closed");
      advance(end + 2 - pos_);
      return true;
    }
    if (startsWith("<!DOCTYPE")) {
      const size_t end = s_.find('>', pos_);
      if (end == std::string_view::npos) fail("DOCTYPE is never closed");
      advance(end + 1 - pos_);
      return true;
    }
    return false;
  }
  void skipMisc() {
    do skipSpace();
    while (skipOneMisc());
  }
  void skipProlog() {
    if (startsWith("\xEF\xBB\xBF")) advance(3);  // a UTF-8 byte order mark
    skipMisc();
  }

  std::string name(const char* what) {
    if (!nameStart(peek()))
      fail(atEnd() ? std::string("file ends where ") + what + " was expected"
                   : std::string("expected ") + what + ", found '" + printable(peek()) + "'");
    const size_t start = pos_;
    while (!atEnd() && nameChar(peek())) advance();
    return std::string(s_.substr(start, pos_ - start));
  }

  static std::string printable(char c) {
    if (std::isprint(static_cast<unsigned char>(c))) return std::string(1, c);
    char buf[8];
    snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(c));
    return buf;
  }

  std::string attrValue(const std::string& attrName) {
    const char quote = peek();
    if (quote != '"' && quote != '\'')
      fail("the value of attribute '" + attrName + "' must be in quotes");
    const int startLine = line_;
    advance();
    std::string out;
    for (;;) {
      if (atEnd()) {
        line_ = startLine;
        fail("the value of attribute '" + attrName + "' is never closed");
      }
      const char c = peek();
      if (c == quote) break;
      if (c == '<') fail("'<' inside the value of attribute '" + attrName + "' (a missing quote?)");
      if (c == '&') {
        out += entity();
        continue;
      }
      out += c;
      advance();
    }
    advance();
    return out;
  }

  std::string entity() {
    const size_t semi = s_.find(';', pos_);
    if (semi == std::string_view::npos || semi - pos_ > 12)
      fail("'&' that starts no entity (write &amp;)");
    const std::string_view e = s_.substr(pos_ + 1, semi - pos_ - 1);
    std::string out;
    if (e == "lt")
      out = "<";
    else if (e == "gt")
      out = ">";
    else if (e == "amp")
      out = "&";
    else if (e == "quot")
      out = "\"";
    else if (e == "apos")
      out = "'";
    else if (e.size() > 1 && e[0] == '#') {
      const bool hex = e[1] == 'x';
      uint32_t cp = 0;
      const std::string_view digits = e.substr(hex ? 2 : 1);
      if (digits.empty()) fail("empty character reference");
      for (char d : digits) {
        const int v = std::isdigit(static_cast<unsigned char>(d)) ? d - '0'
                      : hex && std::isxdigit(static_cast<unsigned char>(d))
                          ? std::tolower(static_cast<unsigned char>(d)) - 'a' + 10
                          : -1;
        if (v < 0 || cp > 0x10ffff) fail("bad character reference &" + std::string(e) + ";");
        cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(v);
      }
      if (cp == 0 || cp > 0x10ffff) fail("bad character reference &" + std::string(e) + ";");
      appendUtf8(out, cp);
    } else {
      fail("unknown entity &" + std::string(e) + ";");
    }
    advance(semi + 1 - pos_);
    return out;
  }

  XmlElement element(int depth) {
    if (depth >= kMaxXmlDepth) fail("elements nested deeper than " + std::to_string(kMaxXmlDepth));
    XmlElement el;
    el.line = line_;
    advance();  // '<'
    el.name = name("an element name");
    for (;;) {
      const size_t before = pos_;
      skipSpace();
      if (atEnd()) fail("file ends inside the tag <" + el.name + ">");
      if (startsWith("/>")) {
        advance(2);
        return el;
      }
      if (peek() == '>') {
        advance();
        break;
      }
      if (pos_ == before)
        fail("expected a space, '>' or '/>' in <" + el.name + ">, found '" + printable(peek()) +
             "'");
      std::string key = name("an attribute name");
      skipSpace();
      if (atEnd()) fail("file ends inside the tag <" + el.name + ">");
      if (peek() != '=') fail("attribute '" + key + "' of <" + el.name + "> has no '=' and value");
      advance();
      skipSpace();
      for (const auto& kv : el.attrs)
        if (kv.first == key) fail("attribute '" + key + "' given twice in <" + el.name + ">");
      std::string value = attrValue(key);
      el.attrs.emplace_back(std::move(key), std::move(value));
    }
    // Content: child elements, comments, white space.
    for (;;) {
      skipSpace();
      if (atEnd()) {
        line_ = el.line;
        fail("<" + el.name + "> is never closed (the file ends first)");
      }
      if (skipOneMisc()) continue;
      if (startsWith("</")) {
        advance(2);
        const std::string closing = name("the name of a closing tag");
        if (closing != el.name)
          fail("</" + closing + "> closes <" + el.name + "> opened at line " +
               std::to_string(el.line));
        skipSpace();
        if (peek() != '>') fail("expected '>' after </" + closing);
        advance();
        return el;
      }
      if (peek() == '<') {
        el.children.push_back(element(depth + 1));
        continue;
      }
      fail("unexpected text inside <" + el.name +
           "> (topology files hold only elements and attributes)");
    }
  }

  std::string_view s_;
  const std::string& source_;
  size_t pos_ = 0;
  int line_ = 1;
};

void escape(std::string& out, const std::string& v) {
  for (char c : v) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
}

void write(std::string& out, const XmlElement& el, int depth) {
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += '<';
  out += el.name;
  for (const auto& [k, v] : el.attrs) {
    out += ' ';
    out += k;
    out += "=\"";
    escape(out, v);
    out += '"';
  }
  if (el.children.empty()) {
    out += "/>\n";
    return;
  }
  out += ">\n";
  for (const XmlElement& c : el.children) write(out, c, depth + 1);
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += "</" + el.name + ">\n";
}

}  // namespace

const std::string* XmlElement::attr(std::string_view key) const {
  for (const auto& kv : attrs)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

XmlElement parseXml(std::string_view text, const std::string& source) {
  return Reader(text, source).document();
}

std::string writeXml(const XmlElement& root) {
  std::string out;
  write(out, root, 0);
  return out;
}

}  // namespace gyre::topology
