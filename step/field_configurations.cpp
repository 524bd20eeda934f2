#include "step/field_configurations.hpp"

#include <array>

#include "base/assert.hpp"

namespace infonce::step {
namespace {

constexpr Strategy point(GatherKind gather, LossScope scope, BackwardScale scale) {
  // Every project in docs/field.md reduces with DDP's mean.
  return {.gather = gather, .scope = scope, .scale = scale, .reduction = Reduction::mean};
}

// The same over the world group: dist.all_gather on the default group, the
// own slot at the world rank (issue 29, finding 8).
constexpr Strategy world_point(GatherKind gather, LossScope scope, BackwardScale scale) {
  Strategy out = point(gather, scope, scale);
  out.group = GatherGroup::world;
  return out;
}

constexpr auto kOwnLive = GatherKind::detached_own_live;
constexpr auto kDetached = GatherKind::detached;
constexpr auto kAutograd = GatherKind::autograd;
constexpr auto kGlobal = LossScope::global;
constexpr auto kLocal = LossScope::local;
constexpr auto kScale1 = BackwardScale::none;
constexpr auto kScaleP = BackwardScale::dp_shards;
constexpr auto kScaleW = BackwardScale::world_size;
constexpr std::string_view kOpenClip = "src/open_clip/loss.py @ 89fb801f (ClipLoss)";
constexpr std::string_view kLogitScale = "log logit scale";
constexpr std::string_view kTorchMultimodal =
    "torchmultimodal/modules/losses/contrastive_loss_with_temperature.py @ 02112ecb";

const std::array kConfigurations = {
    FieldConfiguration{
        1, "modelscope/ms-swift", "InfonceLoss, INFONCE_USE_BATCH=True, before the fix",
        "swift/loss/embedding.py @ 3602360a", point(kOwnLive, kGlobal, kScale1), "", false},
    FieldConfiguration{2, "modelscope/ms-swift", "InfonceLoss, after the fix (loss x P)",
                       "swift/loss/embedding_fixed.py (patches/compensate-ddp-averaging.patch)",
                       point(kOwnLive, kGlobal, kScaleP), "", false},
    FieldConfiguration{3, "mlfoundations/open_clip", "ClipLoss() default", kOpenClip,
                       point(kOwnLive, kGlobal, kScale1), kLogitScale, false},
    FieldConfiguration{4, "mlfoundations/open_clip", "ClipLoss(local_loss=True)", kOpenClip,
                       point(kDetached, kLocal, kScale1), kLogitScale, false},
    FieldConfiguration{5, "mlfoundations/open_clip", "ClipLoss(gather_with_grad=True)", kOpenClip,
                       point(kAutograd, kGlobal, kScale1), kLogitScale, false},
    FieldConfiguration{6, "mlfoundations/open_clip",
                       "ClipLoss(local_loss=True, gather_with_grad=True)", kOpenClip,
                       point(kAutograd, kLocal, kScale1), kLogitScale, false},
    FieldConfiguration{7, "huggingface/sentence-transformers",
                       "MultipleNegativesRankingLoss(gather_across_devices=True)",
                       "sentence_transformers/losses/MultipleNegativesRankingLoss.py @ 023acff5",
                       point(kAutograd, kLocal, kScale1), "", true},
    FieldConfiguration{8, "luyug/GradCache", "DistributedContrastiveLoss",
                       "src/grad_cache/loss.py @ 6b3291ac", point(kOwnLive, kGlobal, kScale1), "",
                       true},
    FieldConfiguration{9, "FlagOpen/FlagEmbedding", "negatives_cross_device=True",
                       "FlagEmbedding/abc/finetune/embedder/AbsModeling.py @ 0dff36cd",
                       point(kOwnLive, kGlobal, kScale1), "", true},
    FieldConfiguration{10, "texttron/tevatron", "EncoderModel under DDP (loss x world size)",
                       "src/tevatron/retriever/modeling/encoder.py @ 0b804c1f",
                       world_point(kOwnLive, kGlobal, kScaleW), "", false},
    FieldConfiguration{11, "KevinMusgrave/pytorch-metric-learning",
                       "DistributedLossWrapper(loss), efficient=False",
                       "src/pytorch_metric_learning/utils/distributed.py @ 024a99e4",
                       point(kOwnLive, kGlobal, kScaleW), "a wrapped loss's own parameters", true},
    FieldConfiguration{12, "KevinMusgrave/pytorch-metric-learning",
                       "DistributedLossWrapper(loss, efficient=True)",
                       "src/pytorch_metric_learning/utils/distributed.py @ 024a99e4",
                       point(kOwnLive, kLocal, kScaleW), "a wrapped loss's own parameters", true},
    FieldConfiguration{13, "lightly-ai/lightly",
                       "NTXentLoss(gather_distributed=True), GatherLayer before PR #1531",
                       "lightly/utils/dist.py @ ec9f6202", point(kOwnLive, kLocal, kScale1), "",
                       false},
    FieldConfiguration{
        14, "lightly-ai/lightly", "NTXentLoss(gather_distributed=True), PR #1531 and later",
        "lightly/utils/dist.py @ 80fa5b5c", point(kAutograd, kLocal, kScale1), "", false},
    FieldConfiguration{15, "facebookresearch/multimodal",
                       "ContrastiveLossWithTemperature, backprop_in_gather=True (default)",
                       kTorchMultimodal, point(kAutograd, kLocal, kScale1), kLogitScale, false},
    FieldConfiguration{16, "facebookresearch/multimodal",
                       "ContrastiveLossWithTemperature, backprop_in_gather=False", kTorchMultimodal,
                       point(kDetached, kLocal, kScale1), kLogitScale, false},
    FieldConfiguration{17, "NVIDIA/Megatron-LM", "ICT biencoder pretraining (loss x DP size)",
                       "pretrain_ict.py @ 097fa65b", point(kOwnLive, kGlobal, kScaleP), "", true},
    // SigLIP (SPEC section 15): the texts travel the ring (or are reduced or
    // gathered) with autograd; each rank's loss over its own images.
    FieldConfiguration{18, "mlfoundations/open_clip",
                       "SigLipLoss, dist_impl bidir (default), shift, reduce or gather",
                       "src/open_clip/loss.py (installed open-clip-torch 3.3.0, SigLipLoss)",
                       point(kAutograd, kLocal, kScale1), "log scale and bias", false},
};

}  // namespace

std::span<const FieldConfiguration> field_configurations() {
  for (std::size_t i = 0; i < kConfigurations.size(); ++i) {
    INFONCE_ASSERT(kConfigurations[i].row == static_cast<int>(i) + 1);
  }
  return kConfigurations;
}

}  // namespace infonce::step
