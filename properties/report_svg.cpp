// The campaign as a picture, hand-written SVG (no dependency, opens in any
// browser): the verdict, how often each property was checked, the coverage
// of every generator axis (cases per value), and the distribution of the
// gradient error relative to its tolerance (a histogram of log10 scaled_err
// per scalar type). `.html` wraps the same SVG in a page.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <sstream>

#include "properties/campaign_report.hpp"
#include "properties/svg_canvas.hpp"
#include "step/tolerance.hpp"

namespace infonce::properties {
namespace {

constexpr int kWidth = 1000;
constexpr int kMargin = 20;
constexpr int kLabelWidth = 180;  // axis names
constexpr int kCellWidth = 88;    // one axis value
constexpr int kRowHeight = 26;
constexpr const char* kFont = "DejaVu Sans, Helvetica, Arial, sans-serif";
constexpr const char* kMono = "DejaVu Sans Mono, Menlo, Consolas, monospace";
constexpr const char* kFloat64Color = "#3266a8";
constexpr const char* kFloat32Color = "#e08a1e";
constexpr const char* kPassColor = "#2e7d32";
constexpr const char* kFailColor = "#c62828";

// Long lines broken at spaces, and words longer than a line broken anywhere.
std::vector<std::string> wrapped(const std::string& text, std::size_t width) {
  const std::string indent = "    ";
  std::vector<std::string> lines;
  std::string line;
  std::istringstream words(text);
  std::string word;
  auto flush = [&] {
    lines.push_back(line);
    line = indent;
  };
  while (words >> word) {
    const bool fresh = line.empty() || line == indent;
    if (!fresh && line.size() + 1 + word.size() > width) flush();
    if (!(line.empty() || line == indent)) line += ' ';
    while (line.size() + word.size() > width) {
      const std::size_t room = width - line.size();
      line += word.substr(0, room);
      word.erase(0, room);
      flush();
    }
    line += word;
  }
  if (!line.empty() && line != indent) lines.push_back(line);
  return lines;
}

std::string with_commas(std::int64_t n) {
  // Appended, not inserted: GCC 12 -O3 reports string::insert falsely (-Wrestrict).
  const std::string digits = std::to_string(n);
  std::string text;
  text.reserve(digits.size() + digits.size() / 3);
  for (std::size_t j = 0; j < digits.size(); ++j) {
    if (j > 0 && (digits.size() - j) % 3 == 0) text.push_back(',');
    text.push_back(digits[j]);
  }
  return text;
}

int draw_title(SvgCanvas& svg, const CampaignReport& report, int y) {
  const CampaignResult& r = report.result;
  const bool passed = report.passed();
  svg.rect(0, 0, kWidth, 64, passed ? kPassColor : kFailColor);
  std::string verdict = passed ? "PASSED" : r.failure ? "FAILED" : "SELF-CHECK DIVERGED";
  if (!report.mutant.empty() && r.failure) verdict += " (mutant caught)";
  svg.text(kMargin, 28, "infonce-sim check: " + verdict, 20,
           "fill=\"#ffffff\" font-weight=\"bold\"");
  std::string subtitle = "seed " + std::to_string(report.seed) + ", " + with_commas(r.cases_run) +
                         " cases (" + with_commas(r.discarded) + " discarded), mutant " +
                         (report.mutant.empty() ? "none" : report.mutant) + ", limits " +
                         report.limits;
  if (!report.seed_source.empty()) subtitle += ", seed from " + report.seed_source;
  if (r.stopped_by == StopReason::time) subtitle += ", time budget " + report.time_budget;
  if (r.stopped_by == StopReason::interrupted) subtitle += ", interrupted";
  svg.text(kMargin, 50, subtitle, 13, "fill=\"#ffffff\"");
  return y + 64;
}

int draw_properties(SvgCanvas& svg, const CampaignReport& report, int y) {
  const CampaignResult& r = report.result;
  y += 28;
  svg.text(kMargin, y, "Properties", 15, "font-weight=\"bold\"");
  y += 8;
  const auto names = property_names();
  const int column = (kWidth - 2 * kMargin) / 2;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const int x = kMargin + static_cast<int>(i % 2) * column;
    const int row_y = y + 20 + static_cast<int>(i / 2) * 20;
    const auto it = r.property_checks.find(names[i]);
    const std::int64_t checked = it == r.property_checks.end() ? 0 : it->second;
    bool failed = false;
    if (r.failure) {
      for (const auto& f : r.failure->failures) failed = failed || f.property == names[i];
    }
    const std::string status = failed         ? "FAILED (checked on " + with_commas(checked) + ")"
                               : checked == 0 ? "applied to no case"
                                              : "held on " + with_commas(checked) + " cases";
    const char* color = failed ? kFailColor : checked == 0 ? "#777777" : kPassColor;
    svg.rect(x, row_y - 10, 10, 10, color);
    svg.text(x + 16, row_y, names[i] + ": " + status, 12);
  }
  return y + 20 + static_cast<int>((names.size() + 1) / 2) * 20;
}

int draw_coverage(SvgCanvas& svg, const Coverage& coverage, int y) {
  y += 30;
  svg.text(kMargin, y, "Coverage: cases per value of every generator axis", 15,
           "font-weight=\"bold\"");
  svg.text(kMargin, y + 16,
           "label: value: cases; bar length: cases relative to the axis's most frequent value", 11,
           "fill=\"#555555\"");
  y += 26;
  int row = 0;
  for (const auto& [axis, values] : coverage) {
    const int row_y = y + row * kRowHeight;
    if (row % 2 == 0) svg.rect(kMargin - 4, row_y, kWidth - 2 * kMargin + 8, kRowHeight, "#f3f5f8");
    svg.text(kMargin + kLabelWidth - 8, row_y + 17, axis, 12, "text-anchor=\"end\"");
    std::int64_t most = 1;
    for (const auto& [value, count] : values) most = std::max(most, count);
    int column = 0;
    for (const auto& [value, count] : coverage_in_reading_order(values)) {
      const double x = kMargin + kLabelWidth + column * kCellWidth;
      const double share = static_cast<double>(count) / static_cast<double>(most);
      svg.rect(x, row_y + 4, (kCellWidth - 6) * share, kRowHeight - 8, "#b9cde6", "",
               axis + " = " + value + ": " + std::to_string(count) + " cases");
      svg.text(x + 3, row_y + 17, value + ": " + with_commas(count), 11);
      ++column;
    }
    ++row;
  }
  return y + row * kRowHeight;
}

// The x position of a histogram slot: 0 exact, 1..kBins the decades, kBins+1 non-finite.
int draw_histogram(SvgCanvas& svg, const std::map<std::string, ErrorHistogram>& histograms, int y) {
  y += 34;
  svg.text(kMargin, y, "Gradient error relative to the summands' scale (log10 scaled_err)", 15,
           "font-weight=\"bold\"");
  svg.text(kMargin, y + 16,
           "cases per decade; a case passes while its error stays left of its type's tolerance", 11,
           "fill=\"#555555\"");
  const int top = y + 40;
  const int height = 200;
  const int left = kMargin + 50;
  const int slots = ErrorHistogram::kBins + 2;
  const double slot_width = static_cast<double>(kWidth - left - kMargin) / slots;
  const ErrorHistogram empty;
  const ErrorHistogram& f64 = histograms.count("float64") ? histograms.at("float64") : empty;
  const ErrorHistogram& f32 = histograms.count("float32") ? histograms.at("float32") : empty;
  auto slot_count = [](const ErrorHistogram& h, int slot) {
    if (slot == 0) return h.exact;
    if (slot == ErrorHistogram::kBins + 1) return h.non_finite;
    return h.bins[static_cast<std::size_t>(slot - 1)];
  };
  std::int64_t most = 1;
  for (int s = 0; s < slots; ++s) most = std::max({most, slot_count(f64, s), slot_count(f32, s)});
  const int bottom = top + height;
  svg.line(left, bottom, kWidth - kMargin, bottom, "#333333");
  svg.line(left, top, left, bottom, "#333333");
  // Round tick steps (1, 2 or 5 times a power of ten), at most 5 of them.
  double step = 1;
  while (static_cast<double>(most) / step > 5) {
    const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
    step *= mantissa < 1.5 ? 2 : mantissa < 3 ? 2.5 : 2;
  }
  for (double value = 0; value <= static_cast<double>(most) + 1e-9; value += step) {
    const double gy = bottom - height * value / static_cast<double>(most);
    if (value > 0) svg.line(left, gy, kWidth - kMargin, gy, "#dddddd");
    svg.text(left - 6, gy + 4, with_commas(static_cast<std::int64_t>(std::llround(value))), 10,
             "text-anchor=\"end\"");
  }
  auto x_of_slot = [&](int slot) { return left + slot * slot_width; };
  for (int s = 0; s < slots; ++s) {
    const double x = x_of_slot(s);
    const double bar = (slot_width - 4) / 2;
    const std::int64_t a = slot_count(f64, s), b = slot_count(f32, s);
    const std::string where =
        s == 0           ? "error exactly 0"
        : s == slots - 1 ? "non-finite error"
                         : "error in [1e" + std::to_string(ErrorHistogram::kMinExponent + s - 1) +
                               ", 1e" + std::to_string(ErrorHistogram::kMinExponent + s) + ")";
    svg.rect(x + 2, bottom - height * static_cast<double>(a) / most, bar,
             height * static_cast<double>(a) / most, kFloat64Color, "",
             "float64, " + where + ": " + std::to_string(a) + " cases");
    svg.rect(x + 2 + bar, bottom - height * static_cast<double>(b) / most, bar,
             height * static_cast<double>(b) / most, kFloat32Color, "",
             "float32, " + where + ": " + std::to_string(b) + " cases");
    // Bars too short to read against the axis get their count written on top.
    for (const auto& [count, offset] : {std::pair{a, 0.0}, std::pair{b, bar}}) {
      const double bar_height = height * static_cast<double>(count) / most;
      if (count > 0 && bar_height < 24) {
        svg.text(x + 2 + offset + bar / 2, bottom - bar_height - 3, with_commas(count), 9,
                 "text-anchor=\"middle\" fill=\"#333333\"");
      }
    }
    std::string label;
    if (s == 0) label = "exact";
    if (s == slots - 1) label = "NaN/inf";
    const int exponent = ErrorHistogram::kMinExponent + s - 1;
    if (s > 0 && s < slots - 1 && exponent % 2 == 0) label = "1e" + std::to_string(exponent);
    if (!label.empty()) {
      svg.text(x + slot_width / 2, bottom + 14, label, 10, "text-anchor=\"middle\"");
    }
  }
  svg.text((left + kWidth - kMargin) / 2.0, bottom + 30,
           "the decade of scaled_err = max |gradient error| / the summands' scale (bar at 1e-16: "
           "errors in [1e-16, 1e-15))",
           11, "text-anchor=\"middle\" fill=\"#555555\"");
  // Tolerances (SPEC section 6), at the decade of rtol.
  const struct {
    ScalarType scalar;
    const char* color;
    const char* name;
  } types[] = {{ScalarType::float64, kFloat64Color, "float64"},
               {ScalarType::float32, kFloat32Color, "float32"}};
  for (const auto& type : types) {
    const double rtol = step::tolerance_for(type.scalar).rtol;
    const int decade = static_cast<int>(std::floor(std::log10(rtol) + 1e-9));
    const double x = x_of_slot(decade - ErrorHistogram::kMinExponent + 1);
    svg.line(x, top - 10, x, bottom, type.color, "stroke-width=\"2\" stroke-dasharray=\"6,4\"");
    char label[64];
    std::snprintf(label, sizeof label, "%s tolerance %.0e", type.name, rtol);
    // On a white ground, so that a bar behind it does not hide it.
    const double label_y = top + (type.scalar == ScalarType::float64 ? 8 : 24);
    svg.rect(x + 2, label_y - 11, 6.4 * static_cast<double>(std::strlen(label)), 15, "#ffffff",
             "fill-opacity=\"0.85\"");
    svg.text(x + 4, label_y, label, 11, std::string("fill=\"") + type.color + "\"");
  }
  // Legend.
  const double lx = kWidth - kMargin - 330;
  svg.rect(lx, top - 30, 12, 12, kFloat64Color);
  auto cases = [](std::int64_t n) { return with_commas(n) + (n == 1 ? " case" : " cases"); };
  svg.text(lx + 18, top - 20, "float64: " + cases(f64.total()), 12);
  svg.rect(lx + 170, top - 30, 12, 12, kFloat32Color);
  svg.text(lx + 188, top - 20, "float32: " + cases(f32.total()), 12);
  return bottom + 36;
}

int draw_failure(SvgCanvas& svg, const CampaignReport& report, int y) {
  std::ostringstream text;
  write_failure_text(text, report);
  std::vector<std::string> lines;
  std::istringstream in(text.str());
  for (std::string line; std::getline(in, line);) {
    for (auto& part : wrapped(line, 118)) lines.push_back(part);
  }
  y += 24;
  const int height = 16 * static_cast<int>(lines.size()) + 36;
  svg.rect(kMargin - 4, y, kWidth - 2 * kMargin + 8, height, "#fdecea",
           std::string("stroke=\"") + kFailColor + "\"");
  svg.text(kMargin + 6, y + 20, "The failure, shrunk", 15,
           std::string("font-weight=\"bold\" fill=\"") + kFailColor + "\"");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    svg.text(kMargin + 6, y + 40 + 16 * static_cast<double>(i), lines[i], 11,
             std::string("font-family=\"") + kMono + "\" xml:space=\"preserve\"");
  }
  return y + height;
}

}  // namespace

void write_report_svg(std::ostream& out, const CampaignReport& report) {
  SvgCanvas svg(kWidth, kFont);
  int y = draw_title(svg, report, 0);
  y = draw_properties(svg, report, y);
  if (report.result.failure) y = draw_failure(svg, report, y);
  y = draw_histogram(svg, report.result.error_histogram, y);
  y = draw_coverage(svg, report.result.coverage, y);
  svg.write(out, y + kMargin);
}

void write_report_html(std::ostream& out, const CampaignReport& report) {
  std::ostringstream summary;
  write_report_text(summary, report);
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      << "<title>infonce-sim check, seed " << report.seed << "</title>\n"
      << "<style>body{font-family:" << kFont << ";margin:2em;} pre{font-size:12px;}</style>\n"
      << "</head>\n<body>\n";
  write_report_svg(out, report);
  out << "<h2>Summary</h2>\n<pre>" << xml_escape(summary.str()) << "</pre>\n</body>\n</html>\n";
}

}  // namespace infonce::properties
