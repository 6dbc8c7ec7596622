"""ember under torch.distributed (gloo, 2 processes on 127.0.0.1): DDP over a compiled
model and FSDP2 (`fully_shard`) with compiled blocks train like a single-process eager
run on both ranks' batches."""
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

STEPS = 3


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(32)
        self.fc1, self.fc2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 32)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(Block(), Block(), torch.nn.Linear(32, 8))


def _batch(rank):
    g = torch.Generator().manual_seed(10 + rank)
    return torch.randn(16, 32, generator=g), torch.randint(0, 8, (16,), generator=g)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, pattern, out_path):
    import ember  # noqa: F401  (registers the backend in the child)
    from ember.runtime.cache import GLOBAL_CACHE

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    model = _model()
    strict = {"fallback": False}
    if pattern == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        net = DDP(torch.compile(model, backend="ember", options=strict))
    else:
        from torch.distributed.fsdp import fully_shard

        for block in (model[0], model[1]):
            fully_shard(block)
            block.compile(backend="ember", options=strict)
        net = fully_shard(model)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for _ in range(STEPS):
        x, y = _batch(rank)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    params = [p.full_tensor() if hasattr(p, "full_tensor") else p for p in model.parameters()]
    if rank == 0:
        torch.save({"params": [p.detach().clone() for p in params],
                    "compiles": GLOBAL_CACHE.misses}, out_path)
    dist.destroy_process_group()


def _single_process_reference():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(STEPS):
        opt.zero_grad()
        loss = sum(torch.nn.functional.cross_entropy(model(_batch(r)[0]), _batch(r)[1])
                   for r in range(2)) / 2  # DDP averages the ranks' gradients
        loss.backward()
        opt.step()
    return list(model.parameters())


@pytest.mark.parametrize("pattern", ["ddp", "fsdp2"])
def test_two_ranks_train_like_one_process(pattern, tmp_path):
    out = tmp_path / "rank0.pt"
    mp.start_processes(_worker, args=(2, _free_port(), pattern, str(out)), nprocs=2,
                       join=True, start_method="spawn")
    result = torch.load(out)
    assert result["compiles"] >= 2  # forward and backward went through ember
    for got, want in zip(result["params"], _single_process_reference()):
        torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-6)
