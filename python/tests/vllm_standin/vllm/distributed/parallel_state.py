"""The worker's ranks, as vLLM's parallel_state gives them; the tests set
them per worker process (TP_RANK, PP_RANK)."""

TP_RANK = 0
PP_RANK = 0


class _Group:
    @property
    def rank_in_group(self) -> int:
        return PP_RANK


def get_tensor_model_parallel_rank() -> int:
    return TP_RANK


def get_pp_group() -> _Group:
    return _Group()
