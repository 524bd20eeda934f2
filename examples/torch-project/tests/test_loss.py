"""The loss gives the gradients of one big batch on every mesh infonce-sim draws."""


def test_info_nce_matches_one_big_batch(infonce_check):
    infonce_check("infonce_adapter:make")
