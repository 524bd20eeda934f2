// The size of the terms a CLIP or SigLIP logit z = c a . b + bias is made of,
// for the allowance of a precision that rounds them: the rounding of z is a
// few units of roundoff of c sum_k |a_k| |b_k| + |bias|, not of |z|. The two
// differ where a dot product cancels (nearly orthogonal rows of a large
// norm) or where the bias cancels c a . b.
#pragma once

#include "oracle/real.hpp"

namespace infonce::oracle {

// Per row of `sentences`, |W| |x| (over ||W x|| when normalised, with the
// encoder's eps): entrywise at least |e| of the encoded row e, and the
// rounding of W x in F terms is F units of roundoff of it.
RealRows encoding_magnitude(const RealRows& weight, const RealRows& sentences, bool normalize);

// The largest c sum_k m_ik n_jk + |bias| over every image row i and text row
// j (m, n: encoding_magnitude of each tower).
Real max_logit_magnitude(const RealRows& image_magnitude, const RealRows& text_magnitude,
                         Real scale, Real bias);

}  // namespace infonce::oracle
