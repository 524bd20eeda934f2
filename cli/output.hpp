// Output shared by the commands: JSON documents and human-readable numbers.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loss/matrix.hpp"

namespace infonce::cli {

using OutputJson = nlohmann::ordered_json;  // keys stay in the order written

OutputJson matrix_json(const Matrix<double>& matrix);
OutputJson numbers_json(const std::vector<double>& numbers);

// One line of compact JSON. Doubles are printed in the shortest form that
// reads back to the same bits (at most 17 significant digits); a non-finite
// double, which JSON cannot hold, is printed as null.
void print_json_line(std::ostream& out, const OutputJson& document);

// "%.17g": every digit a double holds, for tables.
std::string full_precision(double value);

// A D x F matrix as an aligned table with row and column indices.
void print_matrix_table(std::ostream& out, const Matrix<double>& matrix);

}  // namespace infonce::cli
