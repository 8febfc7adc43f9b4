"""Launcher environments, group layouts and the nccl-tests arithmetic (no processes)."""

from __future__ import annotations

import pytest

from flopwise.bench.comms import (
    CommsConfig,
    bandwidths_gbps,
    canonical_dtype,
    element_count,
    group_layout,
)
from flopwise.bench.dist import SLURM_PORT_BASE, env_from, expand_nodelist
from flopwise.errors import FlopwiseError

TORCHRUN = {
    "RANK": "5",
    "WORLD_SIZE": "8",
    "LOCAL_RANK": "1",
    "MASTER_ADDR": "node0",
    "MASTER_PORT": "29500",
    "GROUP_RANK": "2",
    "TORCHELASTIC_RUN_ID": "x",
}
SRUN = {
    "SLURM_JOB_ID": "123456",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "3",
    "SLURM_NTASKS": "4",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "1",
    "SLURM_JOB_NODELIST": "gpu[07-08]",
}


def test_torchrun_variables() -> None:
    env = env_from(TORCHRUN)
    assert (env.rank, env.world_size, env.local_rank) == (5, 8, 1)
    assert (env.master_addr, env.master_port, env.launcher) == ("node0", 29500, "torchrun")
    assert env.node_key == "node2"  # torchrun's node rank groups ranks by node


def test_torchrun_wins_over_slurm_when_both_are_set() -> None:
    """srun launching one torchrun per node: the workers see both sets of variables."""
    env = env_from({**SRUN, **TORCHRUN})
    assert (env.rank, env.world_size, env.launcher) == (5, 8, "torchrun")


def test_slurm_variables_map_to_rank_world_and_rendezvous() -> None:
    env = env_from(SRUN)
    assert (env.rank, env.world_size, env.local_rank) == (3, 4, 1)
    assert env.master_addr == "gpu07"  # first host of the node list
    assert env.master_port == SLURM_PORT_BASE + 123456 % 10000
    assert (env.launcher, env.node_key) == ("slurm", "node1")


def test_slurm_master_from_environment_when_given() -> None:
    env = env_from({**SRUN, "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "4000"})
    assert (env.master_addr, env.master_port) == ("10.0.0.1", 4000)


def test_sbatch_script_without_srun_is_one_process() -> None:
    no_step = {k: v for k, v in SRUN.items() if k != "SLURM_STEP_ID"}
    env = env_from(no_step)
    assert (env.rank, env.world_size, env.launcher) == (0, 1, "single")


def test_no_launcher_is_a_single_process() -> None:
    env = env_from({})
    assert (env.rank, env.world_size, env.master_port) == (0, 1, None)


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ({**TORCHRUN, "RANK": "x"}, "RANK='x'"),
        ({**TORCHRUN, "RANK": "8"}, "outside a world of 8"),
        ({k: v for k, v in TORCHRUN.items() if k != "MASTER_PORT"}, "MASTER_PORT"),
    ],
)
def test_bad_launcher_variables_are_one_line_errors(bad: dict[str, str], needle: str) -> None:
    with pytest.raises(FlopwiseError, match=needle):
        env_from(bad)


@pytest.mark.parametrize(
    ("nodelist", "hosts"),
    [
        ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
        ("a1,b[9-10]", ["a1", "b9", "b10"]),
        ("n[008-010]-ib", ["n008-ib", "n009-ib", "n010-ib"]),
        ("login", ["login"]),
    ],
)
def test_expand_nodelist(nodelist: str, hosts: list[str]) -> None:
    assert expand_nodelist(nodelist) == hosts


def test_group_layouts() -> None:
    nodes = [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert group_layout(nodes, "all") == [list(range(8))]
    assert group_layout(nodes, "intra") == nodes
    # one group per local index: rank i of every node, as data-parallel groups are built
    assert group_layout(nodes, "inter") == [[0, 4], [1, 5], [2, 6], [3, 7]]


@pytest.mark.parametrize(
    ("nodes", "group", "needle"),
    [
        ([[0, 1]], "inter", "at least 2 nodes"),
        ([[0], [1]], "intra", "at least 2 ranks on every node"),
        ([[0]], "all", "at least 2 ranks"),
    ],
)
def test_impossible_layouts_are_errors(nodes: list[list[int]], group: str, needle: str) -> None:
    with pytest.raises(FlopwiseError, match=needle):
        group_layout(nodes, group)


def test_busbw_factors_match_nccl_tests() -> None:
    """nccl-tests PERFORMANCE.md: 1 GB in 1 s on 4 ranks."""
    expected = {
        "all_reduce": 2 * 3 / 4,
        "all_gather": 3 / 4,
        "reduce_scatter": 3 / 4,
        "all_to_all": 3 / 4,
        "broadcast": 1.0,
        "send_recv": 1.0,
    }
    for op, factor in expected.items():
        algbw, busbw = bandwidths_gbps(op, 1e9, 1.0, 4)
        assert algbw == pytest.approx(1.0)
        assert busbw == pytest.approx(factor), op


def test_sizes_and_counts() -> None:
    cfg = CommsConfig(min_bytes=32 * 1024, max_bytes=1 << 20, factor=2)
    assert cfg.sizes() == [32768 * 2**i for i in range(6)]
    assert CommsConfig(min_bytes=1000, max_bytes=1000).sizes() == [1000]
    # split ops need whole elements per rank: 1000 B of float32 on 3 ranks -> 249 elements
    assert element_count("all_gather", 1000, 4, 3) == 249
    assert element_count("all_reduce", 1000, 4, 3) == 250
    assert element_count("all_to_all", 4, 4, 8) == 8  # never less than one element per rank


def test_config_validation() -> None:
    assert canonical_dtype("bf16") == "bfloat16"
    with pytest.raises(FlopwiseError, match="unknown dtype 'int3'"):
        CommsConfig(dtype="int3")
    with pytest.raises(FlopwiseError, match="at least --min-bytes"):
        CommsConfig(min_bytes=1 << 20, max_bytes=1 << 10)
    with pytest.raises(FlopwiseError, match="unknown op"):
        CommsConfig(ops=("all_reduce", "allreduce"))
    with pytest.raises(FlopwiseError, match="unknown group"):
        CommsConfig(group="rack")


def test_backend_messages_lose_their_boilerplate() -> None:
    from flopwise.bench.session import first_sentence

    raw = RuntimeError(
        "[/pytorch/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:5: Connection reset "
        "by peer. This is typically caused by a remote worker hanging. Check the logs. GLHF!"
    )
    assert first_sentence(raw) == "Read error [127.0.0.1]:5: Connection reset by peer"
    timeout = RuntimeError("Timed out after 5 seconds waiting for clients. 1/2 clients joined.")
    assert (
        first_sentence(timeout)
        == "Timed out after 5 seconds waiting for clients. 1/2 clients joined"
    )
