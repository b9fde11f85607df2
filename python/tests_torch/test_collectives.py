"""Every torch.distributed collective on the gyre backend, against gloo's
result in the same job (or, where gloo lacks the dtype or op, against the
result computed here from every rank's known input)."""

import pytest
import torch
import torch.distributed as dist

from conftest import same, values

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8, torch.int32,
          torch.int64]
OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}
COUNTS = [0, 1, 13, 1000, 65537]


def expected_reduce(dtype, n, size, op, salt=0):
    """The reduction of every rank's values(), computed in int64 (exact for
    these small values) and cast as gyre's result must be."""
    parts = [values(torch.int64, n, r, salt) + (3 if dtype == torch.uint8 else 0) for r in range(size)]
    if op == "sum" or op == "avg":
        out = sum(parts)
    elif op == "product":
        out = parts[0].clone()
        for p in parts[1:]:
            out = out * p
    elif op == "min":
        out = torch.stack(parts).min(0).values
    else:
        out = torch.stack(parts).max(0).values
    if op == "avg":
        if dtype.is_floating_point:
            return (out.to(torch.float64) / size).to(dtype)
        return torch.div(out, size, rounding_mode="trunc").to(dtype)
    return out.to(dtype)


def gloo_has(dtype, op):
    return op != "avg" and dtype != torch.bfloat16


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", list(OPS))
def test_all_reduce(dtype, op, rank, size, gloo):
    for n in COUNTS:
        if op == "product" and dtype.is_floating_point and dtype != torch.float64 and n > 13:
            n = 13  # keep products of up to 4 ranks' values exact in 16 bits
        t = values(dtype, n, rank)
        dist.all_reduce(t, op=OPS[op])
        if dtype in (torch.float16, torch.bfloat16) and op == "avg":
            # the sum is exact, the divide rounds once: compare in float64
            want = expected_reduce(torch.float64, n, size, "sum") / size
            assert torch.equal(t, want.to(dtype)), (n, t, want)
            continue
        assert same(t, expected_reduce(dtype, n, size, op)), (n, dtype, op)
        if gloo_has(dtype, op):
            g = values(dtype, n, rank)
            dist.all_reduce(g, op=OPS[op], group=gloo)
            assert same(t, g), (n, dtype, op)


def test_all_reduce_non_contiguous(rank, size, gloo):
    base = values(torch.float32, 64 * 3, rank).reshape(64, 3)
    t = base.t()  # a transposed view: not contiguous
    assert not t.is_contiguous()
    dist.all_reduce(t)
    g = values(torch.float32, 64 * 3, rank).reshape(64, 3).t()
    dist.all_reduce(g, group=gloo)
    assert torch.equal(t, g) and torch.equal(base, g.t())


def test_all_reduce_premul_sum(rank, size):
    t = values(torch.float32, 100, rank)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    want = expected_reduce(torch.float64, 100, size, "sum") * 0.5
    assert torch.equal(t, want.to(torch.float32))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_broadcast(dtype, rank, size, gloo):
    for root in range(size):
        for n in COUNTS:
            t = values(dtype, n, rank, salt=root)
            dist.broadcast(t, src=root)
            assert same(t, values(dtype, n, root, salt=root))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", ["sum", "max"])
def test_reduce(dtype, op, rank, size):
    for root in range(size):
        t = values(dtype, 1000, rank)
        dist.reduce(t, dst=root, op=OPS[op])
        if rank == root:
            assert same(t, expected_reduce(dtype, 1000, size, op))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_gather(dtype, rank, size, gloo):
    for n in COUNTS:
        t = values(dtype, n, rank)
        out = [torch.empty(n, dtype=dtype) for _ in range(size)]
        dist.all_gather(out, t)
        for r in range(size):
            assert same(out[r], values(dtype, n, r)), (n, r)
        # outputs that are views of one tensor are written in place
        flat = torch.empty(size * n, dtype=dtype)
        dist.all_gather(list(flat.chunk(size)) if n else [torch.empty(0, dtype=dtype)] * size, t)
        if n:
            assert same(flat, torch.cat([values(dtype, n, r) for r in range(size)]))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_gather_into_tensor(dtype, rank, size, gloo):
    for n in COUNTS:
        t = values(dtype, n, rank)
        out = torch.empty(size * n, dtype=dtype)
        dist.all_gather_into_tensor(out, t)
        assert same(out, torch.cat([values(dtype, n, r) for r in range(size)]))
        out2 = torch.empty(size * n, dtype=dtype)
        dist._all_gather_base(out2, t)
        assert same(out2, out)


def test_all_gather_coalesced(rank, size):
    ins = [values(torch.float32, 5, rank), values(torch.float32, 12, rank, salt=1).reshape(3, 4)]
    outs = [[torch.empty(5), torch.empty(3, 4)] for _ in range(size)]
    dist.all_gather_coalesced(outs, ins)
    for r in range(size):
        assert same(outs[r][0], values(torch.float32, 5, r))
        assert same(outs[r][1], values(torch.float32, 12, r, salt=1).reshape(3, 4))


def test_all_gather_object(rank, size):
    got = [None] * size
    dist.all_gather_object(got, {"rank": rank, "name": "r" * rank})
    assert got == [{"rank": r, "name": "r" * r} for r in range(size)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ["sum", "min", "avg"])
def test_reduce_scatter(dtype, op, rank, size, gloo):
    for n in [0, 1, 1000]:
        ins = [values(dtype, n, rank, salt=j) for j in range(size)]
        out = torch.empty(n, dtype=dtype)
        dist.reduce_scatter(out, ins, op=OPS[op])
        want = expected_reduce(dtype, n, size, op, salt=rank)
        if dtype in (torch.float16, torch.bfloat16) and op == "avg":
            want = (expected_reduce(torch.float64, n, size, "sum", salt=rank) / size).to(dtype)
        assert same(out, want), (n, dtype, op)
        big = torch.cat(ins)
        out2 = torch.empty(n, dtype=dtype)
        dist.reduce_scatter_tensor(out2, big, op=OPS[op])
        assert same(out2, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_to_all_single(dtype, rank, size, gloo):
    rows = 4
    t = values(dtype, size * rows * 3, rank).reshape(size * rows, 3)
    out = torch.empty_like(t)
    dist.all_to_all_single(out, t)
    want = torch.cat([values(dtype, size * rows * 3, r).reshape(size * rows, 3)[rank * rows:(rank + 1) * rows]
                      for r in range(size)])
    assert same(out, want)


def test_all_to_all_single_uneven(rank, size, gloo):
    # rank r sends (r + j + 1) rows to rank j
    send_splits = [rank + j + 1 for j in range(size)]
    recv_splits = [j + rank + 1 for j in range(size)]
    t = torch.cat([torch.full((send_splits[j], 2), float(rank * 100 + j)) for j in range(size)])
    out = torch.empty(sum(recv_splits), 2)
    dist.all_to_all_single(out, t, output_split_sizes=recv_splits, input_split_sizes=send_splits)
    want = torch.cat([torch.full((recv_splits[j], 2), float(j * 100 + rank)) for j in range(size)])
    assert torch.equal(out, want)
    g = torch.empty(sum(recv_splits), 2)
    dist.all_to_all_single(g, t, output_split_sizes=recv_splits, input_split_sizes=send_splits, group=gloo)
    assert torch.equal(out, g)


def test_all_to_all_lists(rank, size, gloo):
    ins = [torch.full((rank + j + 1,), rank * 10 + j, dtype=torch.int32) for j in range(size)]
    outs = [torch.empty(j + rank + 1, dtype=torch.int32) for j in range(size)]
    dist.all_to_all(outs, ins)
    for j in range(size):
        assert torch.equal(outs[j], torch.full((j + rank + 1,), j * 10 + rank, dtype=torch.int32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.float16], ids=str)
def test_gather_and_scatter(dtype, rank, size):
    for root in range(size):
        t = values(dtype, 33, rank)
        got = [torch.empty(33, dtype=dtype) for _ in range(size)] if rank == root else None
        dist.gather(t, gather_list=got, dst=root)
        if rank == root:
            for r in range(size):
                assert same(got[r], values(dtype, 33, r))
        out = torch.empty(33, dtype=dtype)
        parts = [values(dtype, 33, j, salt=root) for j in range(size)] if rank == root else None
        dist.scatter(out, scatter_list=parts, src=root)
        assert same(out, values(dtype, 33, rank, salt=root))


def test_objects(rank, size):
    objs = [{"from": 0}, [1, 2]] if rank == 0 else [None, None]
    dist.broadcast_object_list(objs, src=0)
    assert objs == [{"from": 0}, [1, 2]]
    got = [None] * size if rank == 0 else None
    dist.gather_object(("rank", rank), got, dst=0)
    if rank == 0:
        assert got == [("rank", r) for r in range(size)]


def test_send_recv(rank, size):
    if size < 2:
        pytest.skip("needs 2 ranks")
    right, left = (rank + 1) % size, (rank - 1) % size
    t = values(torch.float64, 1 << 16, rank)
    got = torch.empty_like(t)
    # even ranks send first, odd ranks receive first: plain blocking calls
    # (with an odd count of ranks the last even rank sends to rank 0, which
    # also sends first: 512 KiB fits the transports' buffers)
    if rank % 2 == 0:
        dist.send(t, right)
        dist.recv(got, left)
    else:
        dist.recv(got, left)
        dist.send(t, right)
    assert same(got, values(torch.float64, 1 << 16, left))


def test_isend_irecv(rank, size):
    if size < 2:
        pytest.skip("needs 2 ranks")
    right, left = (rank + 1) % size, (rank - 1) % size
    small = values(torch.int32, 100, rank)
    got = torch.empty_like(small)
    reqs = [dist.isend(small, right), dist.irecv(got, left)]
    for r in reqs:
        r.wait()
    assert same(got, values(torch.int32, 100, left))


def test_batch_isend_irecv_any_order(rank, size):
    # 4 MiB each way, sends before receives on every rank: safe only as one
    # batch (gyre runs it as a group)
    right, left = (rank + 1) % size, (rank - 1) % size
    t = values(torch.float32, 1 << 20, rank)
    got = torch.empty_like(t)
    ops = [dist.P2POp(dist.isend, t, right), dist.P2POp(dist.irecv, got, left)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    assert same(got, values(torch.float32, 1 << 20, left))


def test_batch_with_a_send_to_itself(rank, size):
    t = values(torch.int64, 1000, rank)
    got = torch.empty_like(t)
    ops = [dist.P2POp(dist.isend, t, rank), dist.P2POp(dist.irecv, got, rank)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    assert same(got, t)
    with pytest.raises(RuntimeError, match="to itself"):
        dist.send(t, rank)


def test_barrier_and_async_work(rank, size):
    dist.barrier()
    t = values(torch.float32, 1000, rank)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    chained = fut.then(lambda f: f.value()[0] * 2)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    want = expected_reduce(torch.float32, 1000, size, "sum")
    assert same(t, want)
    assert torch.equal(chained.wait(), want * 2)


def test_many_async_in_flight(rank, size):
    ts = [values(torch.float32, 1000 + i, rank, salt=i) for i in range(20)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    torch.futures.wait_all([w.get_future() for w in works])
    for i, t in enumerate(ts):
        assert same(t, expected_reduce(torch.float32, 1000 + i, size, "sum", salt=i))


def test_subgroups(rank, size):
    if size < 2:
        pytest.skip("needs 2 ranks")
    evens = [r for r in range(size) if r % 2 == 0]
    odds = [r for r in range(size) if r % 2 == 1]
    ge, go = dist.new_group(evens), dist.new_group(odds)
    mine, members = (ge, evens) if rank % 2 == 0 else (go, odds)
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=mine)
    assert t.item() == sum(members)
    assert dist.get_backend(mine) == "gyre"
    assert mine.made_by == "rendezvous"  # (a split needs every rank of the parent)
    everyone = dist.new_group()
    assert everyone.made_by == "split"
    t = torch.tensor([float(rank)])
    work = dist.all_reduce(t, group=everyone, async_op=True)
    dist.all_reduce(torch.ones(1))  # the parent and its split child are independent
    work.wait()
    assert t.item() == sum(range(size))
    dist.barrier()


def test_bad_arguments_raise(rank, size):
    with pytest.raises(RuntimeError, match="dtype Bool"):
        dist.all_reduce(torch.ones(4, dtype=torch.bool))
    with pytest.raises(RuntimeError, match="BAND"):
        dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND)
    with pytest.raises(RuntimeError, match="dtype Short"):
        dist.broadcast(torch.ones(4, dtype=torch.int16), src=0)
    with pytest.raises(RuntimeError, match="output list has"):
        dist.all_gather([torch.empty(4)] * (size + 1), torch.ones(4))
    with pytest.raises(RuntimeError, match="split sizes add up"):
        dist.all_to_all_single(torch.empty(size * 2), torch.ones(size * 2), input_split_sizes=[3] * size)
    # the group still works after refusals
    t = torch.ones(3)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((3,), float(size)))
