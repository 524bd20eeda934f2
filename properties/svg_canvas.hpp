// A small SVG writer (no dependency; the output opens in any browser): the
// campaign report's picture and the benchmarks' plots draw through it.
// Coordinates are written with one decimal; text is XML-escaped.
#pragma once

#include <iosfwd>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace infonce::properties {

class SvgCanvas {
 public:
  SvgCanvas(int width, std::string font_family) : width_(width), font_(std::move(font_family)) {}

  // `extra`: more attributes, written as given (e.g. `text-anchor="end"`).
  void text(double x, double y, const std::string& content, int size = 12,
            const std::string& extra = "");
  void rect(double x, double y, double w, double h, const std::string& fill,
            const std::string& extra = "", const std::string& tooltip = "");
  void line(double x1, double y1, double x2, double y2, const std::string& stroke,
            const std::string& extra = "");
  void polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke,
                const std::string& extra = "");
  void circle(double x, double y, double r, const std::string& fill);

  // The whole document, `height` tall, on a white background.
  void write(std::ostream& out, int height) const;

 private:
  int width_;
  std::string font_;
  std::ostringstream body_;
};

}  // namespace infonce::properties
