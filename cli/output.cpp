#include "cli/output.hpp"

#include <cstdio>
#include <ostream>

#include "base/concat.hpp"

namespace infonce::cli {

OutputJson matrix_json(const Matrix<double>& matrix) {
  OutputJson rows = OutputJson::array();
  for (Eigen::Index r = 0; r < matrix.rows(); ++r) {
    OutputJson row = OutputJson::array();
    for (Eigen::Index j = 0; j < matrix.cols(); ++j) row.push_back(matrix(r, j));
    rows.push_back(std::move(row));
  }
  return rows;
}

OutputJson numbers_json(const std::vector<double>& numbers) {
  OutputJson array = OutputJson::array();
  for (const double number : numbers) array.push_back(number);
  return array;
}

void print_json_line(std::ostream& out, const OutputJson& document) {
  out << document.dump() << '\n';
}

std::string full_precision(double value) {
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

void print_matrix_table(std::ostream& out, const Matrix<double>& matrix) {
  constexpr int kWidth = 25;  // "%.16e" (17 significant digits) takes at most 23
  char cell[48];
  out << "      ";
  for (Eigen::Index j = 0; j < matrix.cols(); ++j) {
    std::snprintf(cell, sizeof cell, " %*s", kWidth, concat("[", std::to_string(j), "]").c_str());
    out << cell;
  }
  out << '\n';
  for (Eigen::Index r = 0; r < matrix.rows(); ++r) {
    std::snprintf(cell, sizeof cell, "%6s", concat("[", std::to_string(r), "]").c_str());
    out << cell;
    for (Eigen::Index j = 0; j < matrix.cols(); ++j) {
      std::snprintf(cell, sizeof cell, " %*.*e", kWidth, 16, matrix(r, j));
      out << cell;
    }
    out << '\n';
  }
}

}  // namespace infonce::cli
