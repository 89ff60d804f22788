"""Compute Engine machine types as ``machineTypes.get`` describes them: vCPUs, memory, and for the
accelerator-optimised families the GPUs built into the type (``accelerators``), which an instance of that type does
not list again as ``guestAccelerators``. Every zone offers every type here (a simplification: real zones differ).
Custom types (``custom-4-5120``) are not emulated: 404, as for any unknown name."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MachineType:
    name: str
    cpus: int
    memory_mb: int
    accelerators: tuple[tuple[str, int], ...] = ()

    @property
    def description(self) -> str:
        return f"{self.cpus} vCPUs, {self.memory_mb / 1024:g} GB RAM" + "".join(
            f", {count} {kind}" for kind, count in self.accelerators
        )


MACHINE_TYPES: dict[str, MachineType] = {
    m.name: m
    for m in (
        MachineType("e2-medium", 2, 4096),
        MachineType("n1-standard-4", 4, 15360),
        MachineType("n1-standard-8", 8, 30720),
        MachineType("n2-standard-4", 4, 16384),
        MachineType("n2-standard-8", 8, 32768),
        MachineType("a2-highgpu-1g", 12, 87040, (("nvidia-tesla-a100", 1),)),
        MachineType("a2-highgpu-2g", 24, 174080, (("nvidia-tesla-a100", 2),)),
        MachineType("a2-highgpu-8g", 96, 696320, (("nvidia-tesla-a100", 8),)),
        MachineType("a2-ultragpu-1g", 12, 174080, (("nvidia-a100-80gb", 1),)),
        MachineType("a3-highgpu-8g", 208, 1916928, (("nvidia-h100-80gb", 8),)),
        MachineType("g2-standard-4", 4, 16384, (("nvidia-l4", 1),)),
        MachineType("g2-standard-8", 8, 32768, (("nvidia-l4", 1),)),
        MachineType("g2-standard-24", 24, 98304, (("nvidia-l4", 2),)),
    )
}
