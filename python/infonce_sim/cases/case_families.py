"""A case file of any loss family: the `family` key picks the parser (case.py's InfoNCE,
clip_case, ntxent_case, siglip_case); each of those reads its own keys only."""

import json

from .case import CaseError, _choice, parse_infonce_case
from .clip_case import parse_clip_case
from .ntxent_case import parse_ntxent_case
from .siglip_case import parse_siglip_case

_PARSERS = {"infonce": parse_infonce_case, "clip": parse_clip_case,
            "ntxent": parse_ntxent_case, "siglip": parse_siglip_case}


def parse_case(obj):
    """An InfoNCE case (case.Case), or with `"family": "clip"` a CLIP case (clip_case.ClipCase),
    with `"family": "ntxent"` an NT-Xent case (ntxent_case.NtXentCase), with `"family":
    "siglip"` a SigLIP case (siglip_case.SiglipCase)."""
    family = "infonce"
    if isinstance(obj, dict) and "family" in obj:
        family = _choice(obj["family"], "family", tuple(_PARSERS))
    return _PARSERS[family](obj)


def load_case(path):
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (OSError, ValueError) as e:
        raise CaseError(f"cannot read: {e}") from e
    return parse_case(obj)
