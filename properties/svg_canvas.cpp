#include "properties/svg_canvas.hpp"

#include <algorithm>
#include <cstdio>
#include <ostream>

#include "properties/campaign_report.hpp"

namespace infonce::properties {
namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

std::string with(const std::string& extra) {
  return extra.empty() ? "" : " " + extra;
}

}  // namespace

void SvgCanvas::text(double x, double y, const std::string& content, int size,
                     const std::string& extra) {
  body_ << "<text x=\"" << number(x) << "\" y=\"" << number(y) << "\" font-size=\"" << size << "\""
        << with(extra) << ">" << xml_escape(content) << "</text>\n";
}

void SvgCanvas::rect(double x, double y, double w, double h, const std::string& fill,
                     const std::string& extra, const std::string& tooltip) {
  body_ << "<rect x=\"" << number(x) << "\" y=\"" << number(y) << "\" width=\""
        << number(std::max(0.0, w)) << "\" height=\"" << number(std::max(0.0, h)) << "\" fill=\""
        << fill << "\"" << with(extra);
  if (tooltip.empty()) {
    body_ << "/>\n";
  } else {
    body_ << "><title>" << xml_escape(tooltip) << "</title></rect>\n";
  }
}

void SvgCanvas::line(double x1, double y1, double x2, double y2, const std::string& stroke,
                     const std::string& extra) {
  body_ << "<line x1=\"" << number(x1) << "\" y1=\"" << number(y1) << "\" x2=\"" << number(x2)
        << "\" y2=\"" << number(y2) << "\" stroke=\"" << stroke << "\"" << with(extra) << "/>\n";
}

void SvgCanvas::polyline(const std::vector<std::pair<double, double>>& points,
                         const std::string& stroke, const std::string& extra) {
  body_ << "<polyline fill=\"none\" stroke=\"" << stroke << "\"" << with(extra) << " points=\"";
  for (const auto& [x, y] : points) body_ << number(x) << "," << number(y) << " ";
  body_ << "\"/>\n";
}

void SvgCanvas::circle(double x, double y, double r, const std::string& fill) {
  body_ << "<circle cx=\"" << number(x) << "\" cy=\"" << number(y) << "\" r=\"" << number(r)
        << "\" fill=\"" << fill << "\"/>\n";
}

void SvgCanvas::write(std::ostream& out, int height) const {
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width_ << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width_ << " " << height << "\" font-family=\"" << font_ << "\">\n"
      << "<rect x=\"0\" y=\"0\" width=\"" << width_ << "\" height=\"" << height
      << "\" fill=\"#ffffff\"/>\n"
      << body_.str() << "</svg>\n";
}

}  // namespace infonce::properties
