// A small XML 1.0 well-formedness check, independent of the writers it
// checks: one root element, matching tags, quoted attributes without '<',
// known entities only, no forbidden control characters. Returns "" when the
// text is well-formed, else what is wrong and where. Also collects the
// elements seen (name and attributes), for tests that look inside.
#pragma once

#include <cctype>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace infonce::tool_test {

struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attributes;  // raw (escaped) values
};

class XmlChecker {
 public:
  explicit XmlChecker(std::string_view text) : text_(text) {}

  std::string check() {
    skip_space();
    if (text_.substr(pos_).starts_with("<?xml")) {
      const auto end = text_.find("?>", pos_);
      if (end == text_.npos) return fail("unterminated XML declaration");
      pos_ = end + 2;
    }
    skip_misc();
    if (!element()) return error_;
    skip_misc();
    if (pos_ != text_.size()) return fail("content after the root element");
    return "";
  }

  const std::vector<XmlElement>& elements() const { return elements_; }

 private:
  std::string fail(const std::string& what) {
    if (error_.empty()) error_ = what + " at offset " + std::to_string(pos_);
    return error_;
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  void skip_misc() {
    for (;;) {
      skip_space();
      if (text_.substr(pos_).starts_with("<!--")) {
        const auto end = text_.find("-->", pos_);
        pos_ = end == text_.npos ? text_.size() : end + 3;
      } else {
        return;
      }
    }
  }

  bool name(std::string& out) {
    const std::size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '-' ||
            text_[pos_] == '_' || text_[pos_] == ':' || text_[pos_] == '.')) {
      ++pos_;
    }
    out = std::string(text_.substr(start, pos_ - start));
    if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])) || out[0] == '-') {
      fail("expected a name");
      return false;
    }
    return true;
  }

  // Checks the character data between `from` and `to` (entities, controls).
  bool characters(std::size_t from, std::size_t to, bool attribute) {
    for (std::size_t i = from; i < to; ++i) {
      const auto ch = static_cast<unsigned char>(text_[i]);
      if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') {
        pos_ = i;
        fail("forbidden control character");
        return false;
      }
      if (ch == '<' || (attribute && ch == '"')) {
        pos_ = i;
        fail("unescaped '<' or quote");
        return false;
      }
      if (ch != '&') continue;
      const auto end = text_.find(';', i);
      if (end == text_.npos || end > to) {
        pos_ = i;
        fail("unterminated entity");
        return false;
      }
      const std::string_view entity = text_.substr(i + 1, end - i - 1);
      const bool named = entity == "amp" || entity == "lt" || entity == "gt" || entity == "quot" ||
                         entity == "apos";
      const bool numeric = entity.size() > 1 && entity[0] == '#';
      if (!named && !numeric) {
        pos_ = i;
        fail("unknown entity &" + std::string(entity) + ";");
        return false;
      }
      i = end;
    }
    return true;
  }

  bool element() {
    if (pos_ >= text_.size() || text_[pos_] != '<') return fail("expected '<'"), false;
    ++pos_;
    XmlElement element;
    if (!name(element.name)) return false;
    for (;;) {
      skip_space();
      if (pos_ >= text_.size()) return fail("unterminated start tag"), false;
      if (text_.substr(pos_).starts_with("/>")) {
        pos_ += 2;
        elements_.push_back(element);
        return true;
      }
      if (text_[pos_] == '>') {
        ++pos_;
        break;
      }
      std::string attribute;
      if (!name(attribute)) return false;
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '=') return fail("expected '='"), false;
      ++pos_;
      skip_space();
      if (pos_ >= text_.size() || (text_[pos_] != '"' && text_[pos_] != '\'')) {
        return fail("unquoted attribute value"), false;
      }
      const char quote = text_[pos_++];
      const auto end = text_.find(quote, pos_);
      if (end == text_.npos) return fail("unterminated attribute value"), false;
      if (!characters(pos_, end, quote == '"')) return false;
      if (element.attributes.count(attribute)) return fail("duplicate attribute"), false;
      element.attributes[attribute] = std::string(text_.substr(pos_, end - pos_));
      pos_ = end + 1;
    }
    elements_.push_back(element);
    for (;;) {
      const auto next = text_.find('<', pos_);
      if (next == text_.npos) return fail("unterminated element " + element.name), false;
      if (!characters(pos_, next, false)) return false;
      pos_ = next;
      if (text_.substr(pos_).starts_with("</")) {
        pos_ += 2;
        std::string closing;
        if (!name(closing)) return false;
        if (closing != element.name) {
          return fail("</" + closing + "> closes <" + element.name + ">"), false;
        }
        skip_space();
        if (pos_ >= text_.size() || text_[pos_] != '>') return fail("expected '>'"), false;
        ++pos_;
        return true;
      }
      if (text_.substr(pos_).starts_with("<!--")) {
        skip_misc();
        continue;
      }
      if (!this->element()) return false;
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::string error_;
  std::vector<XmlElement> elements_;
};

inline std::string xml_problem(std::string_view text) {
  return XmlChecker(text).check();
}

}  // namespace infonce::tool_test
