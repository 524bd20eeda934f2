"""What no torch.distributed backend can serve, for adapters' import stand-ins.

The in-process runtime's thread mode monkeypatches nothing of torch.distributed any more:
each rank thread has its own default group of the in-process backend (backend.py). Left
here is what is not torch's:
  * `gather_object`: accelerate.utils.gather_object (gather every rank's list over the
    world, or a given group, with all_gather_object, then flatten one level). It only calls
    torch.distributed, so it works in-process and under real DDP alike.
"""

import torch.distributed


def gather_object(obj, group=None):
    """accelerate.utils.gather_object: gather every rank's list over the world (or `group`,
    for a trainer's own gather over its DP group), flatten once."""
    size = torch.distributed.get_world_size(group)
    if size == 1:
        return obj if isinstance(obj, list) else list(obj)
    out = [None] * size
    torch.distributed.all_gather_object(out, obj, group=group)
    return [x for y in out for x in y]
