from __future__ import annotations

from agentsvc_core.ports import SealedRecord, SecretStore


class MemorySecrets(SecretStore):
    def __init__(self) -> None:
        self._records: dict[tuple[str, str, str], SealedRecord] = {}

    async def put(self, org_id: str, kind: str, key: str, record: SealedRecord) -> None:
        self._records[(org_id, kind, key)] = record

    async def put_new(self, org_id: str, kind: str, key: str, record: SealedRecord) -> bool:
        if (org_id, kind, key) in self._records:
            return False
        self._records[(org_id, kind, key)] = record
        return True

    async def get(self, org_id: str, kind: str, key: str) -> SealedRecord | None:
        return self._records.get((org_id, kind, key))

    async def get_many(
        self, org_id: str, wanted: list[tuple[str, str]]
    ) -> dict[tuple[str, str], SealedRecord]:
        return {
            (kind, key): self._records[(org_id, kind, key)]
            for kind, key in wanted
            if (org_id, kind, key) in self._records
        }

    async def take(self, org_id: str, kind: str, key: str) -> SealedRecord | None:
        return self._records.pop((org_id, kind, key), None)

    async def swap(self, org_id: str, kind: str, key: str, old: str, new: SealedRecord) -> bool:
        current = self._records.get((org_id, kind, key))
        if current is None or current.value != old:
            return False
        self._records[(org_id, kind, key)] = new
        return True

    async def every(self, org_id: str | None) -> list[tuple[str, str, str, SealedRecord]]:
        return [
            (o, kind, key, record)
            for (o, kind, key), record in self._records.items()
            if org_id is None or o == org_id
        ]

    async def prefixed(self, org_id: str, kind: str, prefixes: list[str]) -> set[str]:
        keys = [k[2] for k in self._records if k[0] == org_id and k[1] == kind]
        return {p for p in prefixes if any(key.startswith(p) for key in keys)}

    async def delete_prefix(self, org_id: str, kind: str, prefix: str) -> int:
        gone = [
            k for k in self._records if k[0] == org_id and k[1] == kind and k[2].startswith(prefix)
        ]
        for k in gone:
            del self._records[k]
        return len(gone)
