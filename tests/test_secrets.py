"""Secrets in traces: detection heuristics, TL100 / TL101, `tracelint redact`, scrubbing.

Planted traces are built here: a small Kineto JSON.gz with a `metadata.system.env` block, an
environment list, a token inside a user annotation that encloses kernel launches, a JWT in an
op's args and a token as a JSON key; and an nsys SQLite made by copying a real shared export
into tmp_path and inserting StringIds values (a NUL-separated environment block among them),
a TARGET_INFO_SYSTEM_ENV row and META_DATA_CAPTURE rows. Every secret is generated at run
time (no token-shaped literal in this file).
"""
from __future__ import annotations

import gzip
import json
import random
import shutil
import sqlite3
import string
from decimal import Decimal
from pathlib import Path

import msgspec
import pytest

from conftest import ALL_TRACES, NSYS_TRACES, TRACES, md5, needs_shared, run_cli
import tracelint.io as tracelint_io  # the quick scan's limit lives there
from tracelint.secrets import patterns as P
from tracelint.secrets import scan_file, scrub_report, scrub_text
from tracelint.secrets.redact import check_file, redact_file
from tracelint.secrets.scan import clear_cache

ALNUM = string.ascii_letters + string.digits


def tok(prefix: str, n: int, seed: int, alphabet: str = ALNUM) -> str:
    """A random token with at least one upper, lower and digit character."""
    rng = random.Random(seed)
    while True:
        body = "".join(rng.choice(alphabet) for _ in range(n))
        if (alphabet != ALNUM) or (any(c.isupper() for c in body) and any(c.islower() for c in body)
                                   and any(c.isdigit() for c in body)):
            return prefix + body


# ---------------------------------------------------------------------------------------------
# the planted Kineto trace
# ---------------------------------------------------------------------------------------------
K = {
    "hf_annotation": tok("hf_", 34, 1),
    "hf_env": tok("hf_", 34, 2),
    "openai": tok("sk-proj-", 48, 3),
    "anthropic": tok("sk-ant-api03-", 80, 4),
    "google": tok("AIza", 35, 5),
    "aws_list": tok("AKIA", 16, 6, string.ascii_uppercase + string.digits),
    "password": "Tr0ub4dor&3-correct-horse",
    "jwt": (tok("eyJ", 30, 7) + "." + tok("eyJ", 40, 8) + "." + tok("", 43, 9)),
    "slack": "xoxb-" + tok("", 12, 10, string.digits) + "-" + tok("", 24, 11),
    "github_key": tok("ghp_", 36, 12),
    "pem_body": tok("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", 64, 13),
}
#: where each Kineto secret is, and its kind
K_WHERE = {
    "hf_annotation": ("$.traceEvents[1].name", "huggingface-token"),
    "hf_env": ("$.metadata.system.env.HF_TOKEN", "huggingface-token"),
    "openai": ("$.metadata.system.env.OPENAI_API_KEY", "openai-key"),
    "anthropic": ("$.metadata.system.env.ANTHROPIC_API_KEY", "anthropic-key"),
    "google": ("$.metadata.system.env.GOOGLE_API_KEY", "google-api-key"),
    "aws_list": ("$.metadata.system.env_list[0]", "aws-access-key-id"),
    "password": ("$.metadata.system.env.DB_PASSWORD", "env-credential"),
    "jwt": ("$.traceEvents[2].args.request", "jwt"),
    "slack": ("$.metadata.notify.slack", "slack-token"),
    "github_key": ("$.metadata.tokens_by_owner", "github-token"),
    "pem_body": ("$.metadata.system.env.SSH_PRIVATE_KEY", "private-key"),
}
#: near misses: none of these names may be reported
K_NEAR_MISS_ENV = {
    "TOKENIZERS_PARALLELISM": "false", "EMPTY_SECRET": "", "GITHUB_TOKEN": "<redacted>",
    "AWS_SECRET_ACCESS_KEY": "***", "NPM_TOKEN": "REDACTED", "USE_AUTH": "true",
    "MAX_TOKENS": "4096", "KEY_PATH": "/etc/ssl/private/server.key",
    "SSH_AUTH_SOCK": "/tmp/ssh-XXXXabcd/agent.42", "PAD_TOKEN": "<pad>",
    "GPG_KEY": "A035C8C19219BA821ECEA86B64E628F8D684696D", "HF_TOKEN_PATH": "/root/.cache/token",
    "WANDB_API_KEY": "<redacted-by-ci>", "SECRET_NAME": "prod-db", "AUTH_TYPE": "oauth2",
}
T0 = 1_700_000_000_000_000          # µs since the epoch: 16 integer digits, as Kineto writes


def _us(offset: str) -> Decimal:
    """A Kineto timestamp with 3 decimals that a float64 cannot hold exactly."""
    return Decimal(T0) + Decimal(offset)


def kineto_trace() -> dict:
    pem = "-----BEGIN PRIVATE KEY-----\n" + K["pem_body"] + "\n-----END PRIVATE KEY-----\n"
    env = {"HF_TOKEN": K["hf_env"], "OPENAI_API_KEY": K["openai"],
           "ANTHROPIC_API_KEY": K["anthropic"], "GOOGLE_API_KEY": K["google"],
           "DB_PASSWORD": K["password"], "SSH_PRIVATE_KEY": pem,
           "HOME": "/home/alice", "HOSTNAME": "gpu-box-17", "PATH": "/usr/bin:/bin",
           **K_NEAR_MISS_ENV}
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 100, "tid": 100,
         "ts": _us("0.123"), "dur": Decimal("20000.250"), "args": {"External id": 1}},
        {"ph": "X", "cat": "user_annotation", "name": f"load_weights {K['hf_annotation']}",
         "pid": 100, "tid": 100, "ts": _us("100.123"), "dur": Decimal("19000.125"),
         "args": {"External id": 2}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100, "tid": 100,
         "ts": _us("150.007"), "dur": Decimal("30.5"),
         "args": {"External id": 3, "request": f"Authorization: Bearer {K['jwt']}"}},
        {"ph": "X", "cat": "python_function", "name": "/home/alice/proj/train.py(12): main",
         "pid": 100, "tid": 100, "ts": _us("90.001"), "dur": Decimal("19500.002"),
         "args": {"Python id": 1, "Python parent id": None}},
    ]
    for i in range(24):
        t = 200 + i * 700
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100,
                   "tid": 100, "ts": _us(f"{t}.321"), "dur": Decimal("6.111"),
                   "args": {"correlation": i + 1, "External id": 10 + i}})
        ev.append({"ph": "X", "cat": "kernel", "name": f"gemm_kernel_{i % 3}", "pid": 0, "tid": 7,
                   "ts": _us(f"{t + 20}.777"), "dur": Decimal("80.333"),
                   "args": {"device": 0, "stream": 7, "correlation": i + 1, "External id": 10 + i,
                            "grid": [64, 1, 1], "block": [128, 1, 1],
                            "registers per thread": 64}})
    ev.append({"ph": "M", "name": "process_name", "pid": 100, "tid": 0,
               "args": {"name": "python"}})
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936,
                              "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
        "username": "alice",
        "host_name": "gpu-box-17.example.com",
        "metadata": {
            "system": {"env": env, "env_list": [f"AWS_ACCESS_KEY_ID={K['aws_list']}", "LANG=C"],
                       "uname": {"node": "gpu-box-17", "system": "Linux"}},
            "notify": {"slack": K["slack"], "channel": "#perf"},
            "tokens_by_owner": {K["github_key"]: "ci-bot"},
        },
        "traceEvents": ev,
        "traceName": "/home/alice/traces/run.json",
    }


def write_kineto(path: Path, trace: dict | None = None) -> Path:
    body = msgspec.json.Encoder(decimal_format="number").encode(trace or kineto_trace())
    path.write_bytes(gzip.compress(body) if path.suffix == ".gz" else body)
    return path


@pytest.fixture
def kineto(tmp_path) -> Path:
    clear_cache()
    return write_kineto(tmp_path / "planted.pt.trace.json.gz")


# ---------------------------------------------------------------------------------------------
# the planted nsys SQLite (a real export + inserted rows)
# ---------------------------------------------------------------------------------------------
NSYS_BASE = TRACES / "nsys" / "nsys2026.1_nsys-ai-mock-pytorch_rtx3080.sqlite"
S = {
    "hf_block": tok("hf_", 34, 21),
    "wandb_block": tok("", 40, 22, "0123456789abcdef"),
    "github_cmd": tok("ghp_", 36, 23),
    "pem_body": tok("MIIEpAIBAAKCAQEA", 64, 24),
    "aws_id": tok("AKIA", 16, 25, string.ascii_uppercase + string.digits),
    "aws_secret": tok("", 40, 26, ALNUM + "+/"),
    "slack": "xoxp-" + tok("", 11, 27, string.digits) + "-" + tok("", 30, 28),
    "url_password": "p4ss-" + tok("", 14, 29),
}
NSYS_NEAR_MISS = {
    "TOKENIZERS_PARALLELISM": "false", "DB_PASSWORD": "", "OPENAI_API_KEY": "<redacted>",
    "SECRET_FLAG": "true", "MAX_TOKENS": "4096", "KEY_PATH": "/etc/ssl/private/k.pem",
    "PASSWORD": "***", "SSH_AUTH_SOCK": "/tmp/ssh-abc/agent.1", "HUGGING_FACE_HUB_TOKEN": "REDACTED",
    "GIT_ASKPASS": "/usr/lib/git-core/askpass", "API_KEY_FILE": "/etc/keys/api.key",
}


def nsys_planted(tmp_path: Path) -> tuple[Path, dict[str, tuple[str, str]]]:
    """Copy a real export into tmp_path and plant secrets; returns (path, where/kind per secret)."""
    dst = tmp_path / "planted.sqlite"
    shutil.copyfile(NSYS_BASE, dst)
    dst.chmod(0o644)
    con = sqlite3.connect(dst)
    base = con.execute("SELECT max(id) FROM StringIds").fetchone()[0]
    block = "\0".join(["LANG=C.UTF-8", f"HF_TOKEN={S['hf_block']}", "HOME=/home/bob",
                       f"WANDB_API_KEY={S['wandb_block']}", "USER=bob",
                       *(f"{k}={v}" for k, v in NSYS_NEAR_MISS.items()), "PATH=/usr/bin"])
    cmd = f"curl -H 'Authorization: token {S['github_cmd']}' https://api.github.com/user"
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{S['pem_body']}\n-----END RSA PRIVATE KEY-----\n"
    url = f"psql postgres://bob:{S['url_password']}@db.internal:5432/traces"
    for i, text in enumerate((block, cmd, pem, url), 1):
        con.execute("INSERT INTO StringIds (id, value) VALUES (?, CAST(? AS TEXT))",
                    (base + i, text.encode()))
    con.execute("INSERT INTO TARGET_INFO_SYSTEM_ENV (globalVid, devStateName, name, nameEnum, value) "
                "VALUES (?, 'Default', 'DeviceEnvironment', 9999, CAST(? AS TEXT))",
                (1 << 56, f"AWS_ACCESS_KEY_ID={S['aws_id']}\0AWS_SECRET_ACCESS_KEY={S['aws_secret']}"
                          "\0HOME=/home/bob".encode()))
    env_row = con.execute("SELECT max(rowid) FROM TARGET_INFO_SYSTEM_ENV").fetchone()[0]
    con.execute("INSERT INTO META_DATA_CAPTURE (name, value) VALUES ('SLACK_BOT_TOKEN', ?)", (S["slack"],))
    slack_row = con.execute("SELECT max(rowid) FROM META_DATA_CAPTURE").fetchone()[0]
    con.execute("INSERT INTO META_DATA_CAPTURE (name, value) VALUES ('OPENAI_API_KEY', '<redacted>')")
    con.execute("INSERT INTO META_DATA_CAPTURE (name, value) VALUES ('API_KEY_FILE', '/etc/keys/api.key')")
    con.commit()
    con.close()
    where = {
        "hf_block": (f"StringIds.value[id={base + 1}]", "huggingface-token"),
        "wandb_block": (f"StringIds.value[id={base + 1}]", "env-credential"),
        "github_cmd": (f"StringIds.value[id={base + 2}]", "github-token"),
        "pem_body": (f"StringIds.value[id={base + 3}]", "private-key"),
        "url_password": (f"StringIds.value[id={base + 4}]", "url-password"),
        "aws_id": (f"TARGET_INFO_SYSTEM_ENV.value[rowid={env_row} name=DeviceEnvironment]",
                   "aws-access-key-id"),
        "aws_secret": (f"TARGET_INFO_SYSTEM_ENV.value[rowid={env_row} name=DeviceEnvironment]",
                       "env-credential"),
        "slack": (f"META_DATA_CAPTURE.value[rowid={slack_row} name=SLACK_BOT_TOKEN]", "slack-token"),
    }
    clear_cache()
    return dst, where


needs_nsys_base = pytest.mark.skipif(not NSYS_BASE.exists(), reason="real trace not present")


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _contains(hit, secret: str) -> bool:
    return secret in hit.raw


def timeline_fingerprint(tl) -> dict:
    """Counts plus every timing column, per table."""
    out = {"counts": tl.counts()}
    for name in ("kernels", "copies", "memsets", "api_calls", "ranges", "syncs", "metrics",
                 "python_frames"):
        df = tl.table(name)
        for col in ("start", "end", "ts", "device", "stream", "correlation", "pid", "tid"):
            if col in df.columns:
                out[f"{name}.{col}"] = df[col].to_numpy().tobytes()
    return out


def non_security(report) -> list[str]:
    return [json.dumps(f.to_dict(), sort_keys=True, default=str) for f in report.sorted_findings()
            if f.rule not in ("TL100", "TL101")]


def secret_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


# ---------------------------------------------------------------------------------------------
# 1. heuristics on single strings
# ---------------------------------------------------------------------------------------------
POSITIVES = [
    ("HF_TOKEN=" + tok("hf_", 34, 31), "huggingface-token"),
    ("token " + tok("ghp_", 36, 32), "github-token"),
    ("x " + tok("github_pat_", 60, 33, ALNUM + "_"), "github-token"),
    (tok("AKIA", 16, 34, string.ascii_uppercase + string.digits), "aws-access-key-id"),
    ("key=" + tok("sk-", 48, 35), "openai-key"),
    (tok("sk-ant-api03-", 90, 36), "anthropic-key"),
    (tok("AIza", 35, 37), "google-api-key"),
    ("xoxb-123456789012-" + tok("", 24, 38), "slack-token"),
    ("Authorization: Bearer " + tok("", 40, 39), "bearer-token"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----", "private-key"),
    ("https://bob:" + tok("", 16, 40) + "@host/x", "url-password"),
    ("https://bucket.s3.amazonaws.com/o?X-Amz-Signature=" + tok("", 64, 41, "0123456789abcdef"), "url-signature"),
    ("DB_PASSWORD=hunter2hunter2", "env-credential"),
    ("MY_SERVICE_API_KEY=" + tok("", 32, 42), "env-credential"),
    ("login --password hunter2hunter2", "inline-credential"),
    ("client_secret: " + tok("", 24, 43), "inline-credential"),
]
NEGATIVES = [
    "TOKENIZERS_PARALLELISM=false", "DB_PASSWORD=", "OPENAI_API_KEY=<redacted>",
    "HF_TOKEN=<redacted-by-tracelint>", "PASSWORD=***", "SECRET=REDACTED", "API_KEY=[REDACTED]",
    "USE_AUTH=true", "MAX_TOKENS=4096", "KEY_PATH=/etc/ssl/private/k.pem",
    "SSH_AUTH_SOCK=/tmp/ssh-abc/agent.1", "GIT_ASKPASS=/usr/bin/askpass", "EOS_TOKEN=</s>",
    "PAD_TOKEN=<|endoftext|>", "GPG_KEY=A035C8C19219BA821ECEA86B64E628F8D684696D",
    "SecretStorage==3.3.1", "google-auth==2.40.3", "task-abcdefghijklmnopqrstuvwxyz",
    "sk-learn-style-name-without-digits-at-all", "cache_key=layer3_attention_cache_v2",
    "void gemm_kernel<float, 128>(float const*, int)", "aten::_scaled_dot_product_attention",
    "transformers/tokenization_utils_base.py(260): __getitem__",
    "<built-in method keys of dict object at 0x7f468bebc7c0>",
    "_ModuleTable004_=c2VyTmFtZSA9ICJQcmdFbnYtbnZpZGlhIiwKd1YgPSA",
    "INVOCATION_ID=a615d136d4594e87b3e7b2f8211c78f5", "HF_TOKEN=$HF_TOKEN",
    "AUTH_URL=https://login.example.com/oauth", "hf_transfer enabled",
]


@pytest.mark.parametrize("text,kind", POSITIVES, ids=[k for _, k in POSITIVES])
def test_positive_shapes(text, kind):
    ms = [m for m in P.find_matches(text, personal=False) if m.category == P.SECRET]
    assert [m.kind for m in ms] == [kind], ms
    scrubbed = scrub_text(text)
    secret = text[ms[0].start:ms[0].end]
    assert secret not in scrubbed and P.REDACTED in scrubbed
    preview = P.mask(secret, kind)
    assert secret not in preview and preview.endswith(f"({len(secret)} chars)")


@pytest.mark.parametrize("text", NEGATIVES)
def test_near_misses_are_not_secrets(text):
    assert [m for m in P.find_matches(text, personal=False) if m.category == P.SECRET] == []
    assert scrub_text(text) == text


def test_mask_shows_prefix_and_length():
    t = "hf_a" + "b" * 33
    assert P.mask(t, "huggingface-token") == "hf_a…(37 chars)"
    assert P.mask("hunter2", "env-credential") == "…(7 chars)"


def test_nul_separated_env_block_and_personal_data():
    hf = tok("hf_", 34, 51)
    block = f"LANG=C\0HF_TOKEN={hf}\0USER=carol\0HOME=/home/carol\0HOSTNAME=node-7\0X=1"
    ms = P.find_matches(block)
    kinds = {(m.kind, m.name) for m in ms}
    assert ("huggingface-token", "HF_TOKEN") in kinds
    assert ("user-name", "USER") in kinds and ("host-name", "HOSTNAME") in kinds
    assert any(m.kind == "home-path" for m in ms)
    assert scrub_text(block) == "LANG=C\0HF_TOKEN=<redacted>\0USER=carol\0HOME=/home/carol\0HOSTNAME=node-7\0X=1"
    assert scrub_text(block, paths=True) == ("LANG=C\0HF_TOKEN=<redacted>\0USER=<user>\0"
                                              "HOME=/home/<user>\0HOSTNAME=<host>\0X=1")
    assert scrub_text("C:\\Users\\Dave\\x.py", paths=True) == "C:\\Users\\<user>\\x.py"
    assert scrub_text("/home/root/x and /home/<user>/y", paths=True) == "/home/root/x and /home/<user>/y"


# ---------------------------------------------------------------------------------------------
# 2. the rules on planted traces
# ---------------------------------------------------------------------------------------------
def _check_rule(path: Path, planted: dict[str, str], where: dict[str, tuple[str, str]]):
    from tracelint.api import lint
    res = scan_file(path)
    for key, secret in planted.items():
        hits = [h for h in res.secrets if _contains(h, secret)]
        assert len(hits) == 1, (key, [h.to_dict() for h in hits])
        loc, kind = where[key]
        assert hits[0].location == loc, (key, hits[0].to_dict())
        assert hits[0].kind == kind, (key, hits[0].to_dict())
        assert secret not in hits[0].preview and secret not in repr(hits[0])
    # nothing else is a secret: each secret hit is one of the planted ones
    assert len(res.secrets) == len(planted), [h.to_dict() for h in res.secrets]
    report = lint(path)
    tl100 = [f for f in report.findings if f.rule == "TL100"]
    assert tl100 and all(f.severity.value == "error" and f.impact_ns == 0 for f in tl100)
    assert sum(f.occurrences for f in tl100) == len(planted)
    text = json.dumps([f.to_dict() for f in report.findings if f.rule in ("TL100", "TL101")],
                      default=str)
    for key, secret in planted.items():
        assert secret not in text, key
        loc, kind = where[key]
        owners = [f for f in tl100 if f.key == f"{kind}@{_container(loc)}"]
        assert len(owners) == 1, (key, [f.key for f in tl100])
        f = owners[0]
        assert loc in f.evidence[next(iter(f.evidence))].summary or loc == f.where.function
        assert f.evidence[next(iter(f.evidence))].status == "measured"
        assert {e.status for layer, e in f.evidence.items() if layer.value != "system"} == {"not_applicable"}
    return report, res


def _container(loc: str) -> str:
    if loc.startswith("$"):
        return loc
    return loc.split("[", 1)[0]


def test_rule_flags_each_planted_kineto_secret_once(kineto):
    report, res = _check_rule_json(kineto)
    names = {h.name for h in res.secrets}
    assert not names & set(K_NEAR_MISS_ENV), names & set(K_NEAR_MISS_ENV)
    tl101 = [f for f in report.findings if f.rule == "TL101"]
    kinds = {f.key for f in tl101}
    assert {"home-path", "user-name", "host-name"} <= kinds
    assert all(f.severity.value == "info" for f in tl101)
    text = json.dumps([f.to_dict() for f in tl101])
    assert "alice" not in text and "gpu-box-17" not in text


def _check_rule_json(path: Path):
    from tracelint.api import lint
    res = scan_file(path)
    for key, secret in K.items():
        hits = [h for h in res.secrets if _contains(h, secret)]
        assert len(hits) == 1, (key, [h.to_dict() for h in hits])
        loc, kind = K_WHERE[key]
        h = hits[0]
        assert (h.location, h.kind) == (loc, kind) or (h.location == loc + " (key)" and h.kind == kind), \
            (key, h.to_dict())
        assert secret not in h.preview and secret not in repr(h)
    assert len(res.secrets) == len(K), [h.to_dict() for h in res.secrets]
    report = lint(path)
    tl100 = [f for f in report.findings if f.rule == "TL100"]
    assert sum(f.occurrences for f in tl100) == len(K)
    assert all(f.severity.value == "error" and f.impact_ns == 0 for f in tl100)
    # the security findings never print a secret (other rules may quote an annotation name
    # holding one: that is what scrub_report is for, see test_scrub_report_*)
    dumped = json.dumps([f.to_dict() for f in report.findings if f.rule in ("TL100", "TL101")],
                        default=str)
    for key, secret in K.items():
        assert secret not in dumped, key
        loc = K_WHERE[key][0]
        owners = [f for f in tl100 if loc in f.evidence[next(iter(f.evidence))].summary]
        assert len(owners) == 1, (key, loc)
    env_group = [f for f in tl100 if f.key.endswith("@$.metadata.system.env")]
    assert env_group, [f.key for f in tl100]
    return report, res


@needs_nsys_base
def test_rule_flags_each_planted_nsys_secret_once(tmp_path):
    path, where = nsys_planted(tmp_path)
    report, res = _check_rule(path, S, where)
    names = {h.name for h in res.secrets}
    assert not names & set(NSYS_NEAR_MISS), names & set(NSYS_NEAR_MISS)
    tl101 = [f for f in report.findings if f.rule == "TL101"]
    assert {"home-path", "user-name"} <= {f.key for f in tl101}


def test_rule_skips_without_a_file():
    from tracelint.api import available_rules
    from tracelint.engine.runner import run_rules
    from tracelint.timeline.model import Timeline
    tl = Timeline()
    tl.meta.source = "/nonexistent/trace.sqlite"
    rules = [r for r in available_rules() if r.id in ("TL100", "TL101")]
    report = run_rules(tl, rules)
    assert report.findings == []
    assert set(report.skipped) == {"TL100", "TL101"}
    assert all("redact --check" in why for why in report.skipped.values())


# ---------------------------------------------------------------------------------------------
# 3. redact
# ---------------------------------------------------------------------------------------------
def test_redact_kineto_removes_secrets_keeps_timeline(kineto, tmp_path):
    import tracelint
    before_md5 = md5(kineto)
    raw_in = secret_bytes(kineto)
    assert all(s.encode() in raw_in for s in K.values())
    out = tmp_path / "out.json.gz"
    res = redact_file(kineto, out)
    assert md5(kineto) == before_md5
    assert out.read_bytes()[:2] == b"\x1f\x8b"                   # same compression
    raw_out = secret_bytes(out)
    for key, secret in K.items():
        assert secret.encode() not in raw_out, key
    assert res.secrets == len(K)
    assert b"<redacted>" in raw_out
    # near misses and everything else untouched
    doc = msgspec.json.decode(raw_out)
    env = doc["metadata"]["system"]["env"]
    for k, v in K_NEAR_MISS_ENV.items():
        assert env[k] == v, k
    assert env["HF_TOKEN"] == "<redacted>" and env["HOME"] == "/home/alice"
    assert doc["traceEvents"][1]["name"] == "load_weights <redacted>"
    assert doc["metadata"]["tokens_by_owner"] == {"<redacted>": "ci-bot"}
    assert b"1700000000000100.123" in raw_out           # timestamps keep every digit
    a, b = tracelint.load(kineto), tracelint.load(out)
    assert timeline_fingerprint(a) == timeline_fingerprint(b)
    assert scan_file(out).secrets == []


@needs_nsys_base
def test_redact_sqlite_removes_secrets_keeps_timeline(tmp_path):
    import tracelint
    path, where = nsys_planted(tmp_path)
    before = md5(path)
    raw_in = path.read_bytes()
    assert all(s.encode() in raw_in for s in S.values())
    out = tmp_path / "out" / "redacted.sqlite"
    res = redact_file(path, out)
    assert md5(path) == before
    raw_out = out.read_bytes()
    for key, secret in S.items():
        assert secret.encode() not in raw_out, key         # VACUUM: no copy left in free pages
    assert res.secrets == len(S)
    con = sqlite3.connect(f"file:{out}?mode=ro", uri=True)
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    base = int(where["hf_block"][0].split("=")[1].rstrip("]")) - 1
    block = con.execute("SELECT CAST(value AS BLOB) FROM StringIds WHERE id = ?", (base + 1,)).fetchone()[0]
    parts = block.split(b"\0")
    assert b"HF_TOKEN=<redacted>" in parts and b"WANDB_API_KEY=<redacted>" in parts
    for k, v in NSYS_NEAR_MISS.items():
        assert f"{k}={v}".encode() in parts, k
    assert b"HOME=/home/bob" in parts                    # personal data only with --paths
    assert con.execute("SELECT value FROM META_DATA_CAPTURE WHERE name = 'SLACK_BOT_TOKEN'").fetchone()[0] == "<redacted>"
    con.close()
    a, b = tracelint.load(path), tracelint.load(out)
    assert timeline_fingerprint(a) == timeline_fingerprint(b)
    assert [k for k in a.kernels["name"]] == [k for k in b.kernels["name"]]
    assert scan_file(out).secrets == []


@needs_nsys_base
def test_redact_paths_anonymises_people_and_hosts(tmp_path):
    import tracelint
    path, _ = nsys_planted(tmp_path)
    out = tmp_path / "paths.sqlite"
    res = redact_file(path, out, paths=True)
    assert res.personal > 0
    raw = out.read_bytes()
    for word in (b"/home/bob", b"USER=bob", b"rich-wsl", b"DESKTOP-KBEMEQS"):
        assert word not in raw, word
    assert b"/home/<user>" in raw and b"<host>" in raw
    assert timeline_fingerprint(tracelint.load(path)) == timeline_fingerprint(tracelint.load(out))
    assert check_file(out, paths=True).counts == {}
    kin = write_kineto(tmp_path / "k.json")
    kout = tmp_path / "k.out.json"
    redact_file(kin, kout, paths=True)
    raw = kout.read_bytes()
    assert b"alice" not in raw and b"gpu-box-17" not in raw
    assert raw[:1] == b"{"                                         # plain JSON stays plain
    assert timeline_fingerprint(tracelint.load(kin)) == timeline_fingerprint(tracelint.load(kout))


def test_redact_refuses_in_place_and_bad_input(kineto, tmp_path):
    from tracelint.errors import TracelintError
    with pytest.raises(TracelintError):
        redact_file(kineto, kineto)
    link = tmp_path / "hard.json.gz"
    link.hardlink_to(kineto)
    with pytest.raises(TracelintError):
        redact_file(kineto, link)
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    with pytest.raises(TracelintError):
        redact_file(bad, tmp_path / "o.json")
    with pytest.raises(TracelintError):
        redact_file(tmp_path / "missing.sqlite", tmp_path / "o.sqlite")


# ---------------------------------------------------------------------------------------------
# 4. the CLI
# ---------------------------------------------------------------------------------------------
def test_cli_check_and_redact_exit_codes(kineto, tmp_path):
    before = md5(kineto)
    r = run_cli("redact", kineto, "--check")
    assert r.returncode == 1, r.stderr
    assert "would be scrubbed" in r.stdout
    for secret in K.values():
        assert secret not in r.stdout + r.stderr
    out = tmp_path / "clean.json.gz"
    r = run_cli("redact", kineto, "-o", out)
    assert r.returncode == 0, r.stderr
    for secret in K.values():
        assert secret not in r.stdout + r.stderr
    assert run_cli("redact", out, "--check").returncode == 0
    assert run_cli("redact", out, "--check", "--paths").returncode == 1   # alice is still there
    out2 = tmp_path / "anon.json.gz"
    assert run_cli("redact", kineto, "-o", out2, "--paths").returncode == 0
    assert run_cli("redact", out2, "--check", "--paths").returncode == 0
    # errors: one line, exit 2
    for args in (("redact", kineto, "-o", kineto),
                 ("redact", tmp_path / "missing.json", "-o", tmp_path / "x.json"),
                 ("redact", kineto),
                 ("redact", kineto, "--check", "-o", tmp_path / "y.json")):
        r = run_cli(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    r = run_cli("redact", garbage, "-o", tmp_path / "g.sqlite")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert md5(kineto) == before


# ---------------------------------------------------------------------------------------------
# 5. scrubbing a report (the wiring for `lint --no-scrub` lives in the CLI)
# ---------------------------------------------------------------------------------------------
def test_scrub_report_removes_secrets_everywhere(kineto):
    from tracelint.api import lint
    report = lint(kineto)
    # the user annotation encloses the launches: its name (with the token) is in nvtx paths
    raw = json.dumps(report.to_dict(), default=str) + "".join(report.timeline.ranges["name"].astype(str))
    assert K["hf_annotation"] in raw
    scrub_report(report)
    text = json.dumps(report.to_dict(), default=str)
    names = " ".join(report.timeline.ranges["name"].astype(str))
    for secret in K.values():
        assert secret not in text and secret not in names
    assert "load_weights <redacted>" in names
    assert len(report.timeline.ranges) == len(lint(kineto).timeline.ranges)


def test_scrub_report_paths(kineto):
    from tracelint.api import lint
    report = lint(kineto)
    scrub_report(report, paths=True)
    text = json.dumps(report.to_dict(), default=str)
    assert "/home/alice" not in text
    frames = " ".join(report.timeline.python_frames["file"].astype(str))
    assert "alice" not in frames


# ---------------------------------------------------------------------------------------------
# 6. round trip on every shared trace
# ---------------------------------------------------------------------------------------------
@needs_shared()
@pytest.mark.slow
@pytest.mark.parametrize("trace", ALL_TRACES, ids=[p.name for p in ALL_TRACES])
def test_redact_round_trip_on_shared_traces(trace, tmp_path):
    from tracelint.api import lint
    clear_cache()
    before = md5(trace)
    out = tmp_path / trace.name
    redact_file(trace, out)
    assert md5(trace) == before
    a, b = lint(trace), lint(out)
    assert a.timeline.counts() == b.timeline.counts()
    assert timeline_fingerprint(a.timeline) == timeline_fingerprint(b.timeline)
    assert non_security(a) == non_security(b)
    assert scan_file(out).secrets == []
    if trace in NSYS_TRACES:
        con = sqlite3.connect(f"file:{out}?mode=ro", uri=True)
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        con.close()


@needs_shared()
@pytest.mark.slow
@pytest.mark.parametrize("trace", ALL_TRACES, ids=[p.name for p in ALL_TRACES])
def test_redact_paths_round_trip_on_shared_traces(trace, tmp_path):
    """--paths rewrites real strings (home directories in call stacks, env blocks): timings
    and counts stay identical and nothing personal is left to find."""
    import tracelint
    clear_cache()
    before = md5(trace)
    out = tmp_path / trace.name
    redact_file(trace, out, paths=True)
    assert md5(trace) == before
    assert timeline_fingerprint(tracelint.load(trace)) == timeline_fingerprint(tracelint.load(out))
    left = check_file(out, paths=True)
    assert left.counts == {}, [h.to_dict() for h in left.hits[:5]]


def test_quick_scan_of_large_json_reads_metadata_and_says_so(tmp_path, monkeypatch):
    """Lint's quick scan of a large Kineto trace reads only the top-level metadata (where
    environment blocks live), finds a secret there, and reports that events were not scanned."""
    import json as _json
    from tracelint.secrets import scan as S
    token = "hf_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z"
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 1, "tid": 7, "ts": i, "dur": 1,
               "args": {"device": 0, "stream": 7}} for i in range(2000)]
    doc = {"schemaVersion": 1, "traceEvents": events,
           "metadata": {"system": {"env": {"HF_TOKEN": token}}}}
    path = tmp_path / "big.json"
    path.write_text(_json.dumps(doc))
    monkeypatch.setattr(tracelint_io, "QUICK_SCAN_LIMIT", 1000)
    S.clear_cache()
    quick = S.scan_file(path, deep=False)
    assert quick.partial and any(token in h.raw for h in quick.secrets)
    S.clear_cache()
    full = S.scan_file(path)
    assert not full.partial and any(token in h.raw for h in full.secrets)


WRITTEN_FORMATS = ["kineto-json", "nsys-sqlite", "rocprofv3-json", "rocpd-sqlite", "jax-json"]


@pytest.mark.parametrize("fmt", WRITTEN_FORMATS)
def test_a_token_in_a_range_name_is_flagged_in_every_format(fmt, tmp_path):
    """TL100 reads the trace file of every format an importer reads (rocprofv3 JSON was
    skipped: its scanner and importer named the format differently), and the report never
    holds the token."""
    from tracelint.api import lint
    from tracelint.synth.builder import TraceBuilder
    from tracelint.synth.jax_writer import write_jax_trace
    from tracelint.synth.rocprof_writer import write_rocpd, write_rocprof_json
    token = tok("hf_", 34, 40)
    b = TraceBuilder()
    with b.range(f"load_weights {token}"):
        b.launch("gemm_kernel", 50_000)
    b.sync()
    write = {"kineto-json": lambda p: b.write_kineto(p), "nsys-sqlite": lambda p: b.write_nsys_sqlite(p),
             "rocprofv3-json": lambda p: write_rocprof_json(b, p),
             "rocpd-sqlite": lambda p: write_rocpd(b, p),
             "jax-json": lambda p: write_jax_trace(b, p)}[fmt]
    path = tmp_path / {"kineto-json": "t.json", "nsys-sqlite": "t.sqlite", "rocprofv3-json": "results.json",
                       "rocpd-sqlite": "t.db", "jax-json": "t.trace.json.gz"}[fmt]
    write(path)
    report = lint(path)
    assert report.timeline.meta.format == fmt
    tl100 = [f for f in report.findings if f.rule == "TL100"]
    assert [f.key.split("@")[0] for f in tl100] == ["huggingface-token"], [f.key for f in tl100]
    assert token not in json.dumps(report.to_dict(), default=str)
    # and `redact` writes a copy without it that reads as the same trace (a rocpd database was
    # sent to the JSON path: "not a JSON trace")
    clean = path.with_name("clean_" + path.name)
    res = run_cli("redact", path, "-o", clean)
    assert res.returncode == 0, res.stderr
    data = clean.read_bytes()
    assert token.encode() not in (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    again = lint(clean)
    assert again.timeline.meta.format == fmt
    assert again.timeline.counts() == report.timeline.counts()
    assert not [f for f in again.findings if f.rule == "TL100"]


def _planted_rocprofv3(path: Path) -> Path:
    """A rocprofv3 JSON whose records (under a top-level key, not traceEvents) hold the
    planted Kineto trace's secrets: in a record beside the benign "private_segment_size" key,
    in nested objects and lists, as a credential-named key's value and as a key."""
    from tracelint.synth.rocprof_writer import write_rocprof_json
    from tracelint.synth.builder import TraceBuilder
    b = TraceBuilder()
    for i in range(40):
        b.launch(f"gemm_{i % 3}", 20_000)
    write_rocprof_json(b, path)
    doc = json.loads(path.read_text())
    proc = doc["rocprofiler-sdk-tool"][0]
    proc["metadata"]["command"] = ["python3", "train.py", "--token", K["hf_env"]]
    kernels = proc["buffer_records"]["kernel_dispatch"]
    kernels[3]["dispatch_info"]["note"] = f"Authorization: Bearer {K['jwt']}"
    kernels[7]["extra"] = {"env": {"DB_PASSWORD": K["password"], "HOME": "/home/alice"}}
    kernels[9]["extra"] = [[K["aws_list"]], {K["github_key"]: 1}]
    proc["buffer_records"]["hip_api"][5]["user"] = "alice"
    path.write_text(json.dumps(doc, indent=1))
    return path


@pytest.mark.parametrize("planted", ["kineto", "rocprofv3"])
def test_values_split_into_items_give_the_hits_of_a_whole_walk(planted, kineto, tmp_path,
                                                                monkeypatch):
    """A large value is split into its items and only the array items that could match are
    decoded: the hits, their order and their counts are those of decoding and walking
    everything (SPLIT_MIN 0: every value split; past the file's size: none)."""
    from tracelint.secrets import scan as S
    path = kineto if planted == "kineto" else _planted_rocprofv3(tmp_path / "results.json")

    def hits(split_min):
        monkeypatch.setattr(S, "SPLIT_MIN", split_min)
        S.clear_cache()
        res = S.scan_file(path)
        return [(h.location, h.container, h.kind, h.name, h.raw) for h in res.hits], res.counts
    walked = hits(1 << 40)
    assert hits(0) == walked
    assert {h[2] for h in walked[0]} >= {"huggingface-token", "jwt", "env-credential",
                                          "aws-access-key-id", "github-token"}


def _plain(data: bytes) -> bytes:
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


@pytest.mark.parametrize("paths", [False, True])
@pytest.mark.parametrize("planted", ["kineto", "rocprofv3"])
def test_redact_splits_large_values_into_the_copy_of_a_whole_walk(planted, paths, kineto,
                                                                   tmp_path, monkeypatch):
    """redact splits a value of SPLIT_MIN bytes or more into its items and writes them out as
    pieces, the records it did not change as written: rocprofv3's 95 MB of records were walked
    whole in 394 MiB. The copy holds what a whole walk writes, with the same hits and counts
    (SPLIT_MIN 0: every value split; past the file's size: none)."""
    from tracelint.secrets import redact as R
    from tracelint.secrets import scan as S
    path = kineto if planted == "kineto" else _planted_rocprofv3(tmp_path / "results.json")

    def redacted(split_min):
        monkeypatch.setattr(R, "SPLIT_MIN", split_min)
        monkeypatch.setattr(S, "SPLIT_MIN", split_min)
        S.clear_cache()
        out = tmp_path / f"out{split_min}.json"
        res = redact_file(path, out, paths=paths)
        return ([(h.location, h.container, h.kind, h.name, h.raw) for h in res.hits], res.counts,
                res.changed_cells), _plain(out.read_bytes())
    whole, whole_copy = redacted(1 << 40)
    split, split_copy = redacted(0)
    assert split == whole and whole[2] >= 5
    assert json.loads(split_copy, parse_float=Decimal) == json.loads(whole_copy, parse_float=Decimal)
    for secret in (K["hf_env"], K["password"], K["github_key"]):
        assert secret.encode() not in split_copy
    if planted == "rocprofv3":          # an untouched record is written as the file has it
        tool = msgspec.json.decode(path.read_bytes(), type=dict[str, list[dict[str, msgspec.Raw]]])
        records = msgspec.json.decode(tool["rocprofiler-sdk-tool"][0]["buffer_records"],
                                      type=dict[str, list[msgspec.Raw]])
        assert b"\n" in bytes(records["kernel_dispatch"][20])
        assert bytes(records["kernel_dispatch"][20]) in split_copy


def test_benign_record_keys_neither_match_nor_make_their_value_match():
    """What lets the byte pre-filter ignore them (json_slices._BENIGN)."""
    from tracelint.secrets.scan import _key_interesting
    for key in P.BENIGN_JSON_KEYS:
        for k in (key, key.upper()):
            assert not P.find_matches(k, None, "", True) and not _key_interesting(k)
            assert not P.find_matches(K["password"], k, "dispatch_info", True)


def test_quick_scan_of_a_large_rocprofv3_file_skips_its_records(tmp_path, monkeypatch):
    """Over the quick scan's limit, a tool's large arrays of records are not read (the scan
    says so), while the metadata beside them is: the command line's token is found."""
    from tracelint.api import lint
    from tracelint.secrets import scan as S
    path = _planted_rocprofv3(tmp_path / "results.json")
    monkeypatch.setattr(tracelint_io, "QUICK_SCAN_LIMIT", 1000)
    monkeypatch.setattr(S, "SPLIT_MIN", 1000)
    S.clear_cache()
    quick = S.scan_file(path, deep=False)
    assert quick.partial
    assert [h.raw for h in quick.secrets] == [K["hf_env"]]
    S.clear_cache()
    tl100 = [f for f in lint(path).findings if f.rule == "TL100"]
    assert {f.key.split("@")[0] for f in tl100} == {"partial-scan", "huggingface-token"}


@pytest.mark.parametrize("form", ["plain", "gzip", "gzip-paths", "metadata-only", "clean"])
def test_large_traces_are_scanned_and_redacted_a_byte_range_at_a_time(form, tmp_path, monkeypatch):
    """From json_slices.STREAM_FROM of text on, the events are read a byte range at a time
    (gzip from a plain copy) and the redacted copy written as it is made: the hits, their
    order and the copy are those of reading the file whole. Here every size is large and a
    range a few events: a token in the first events, the environment and a JSON key."""
    from tracelint.importers import gzip_staging, kineto_ranges
    from tracelint.secrets import json_slices
    monkeypatch.setattr(gzip_staging, "STAGE_MIN", 0)
    trace = kineto_trace()
    if form == "metadata-only":                       # the events hold nothing to scrub
        trace["traceEvents"] = [e for e in trace["traceEvents"]
                                if not any(s in json.dumps(e, default=str) for s in K.values())]
    if form == "clean":
        trace = {"traceEvents": trace["traceEvents"][3:], "schemaVersion": 1}
    src = write_kineto(tmp_path / ("t.json" if form in ("plain", "metadata-only", "clean")
                                   else "t.json.gz"), trace)
    # one event per line, as Kineto writes them (the ranges are cut at such lines)
    text = (gzip.decompress(src.read_bytes()) if src.suffix == ".gz" else src.read_bytes())
    text = text.replace(b'},{"ph"', b'},\n{"ph"')
    src.write_bytes(gzip.compress(text) if src.suffix == ".gz" else text)
    paths = form == "gzip-paths"

    def run(ranged: bool):
        monkeypatch.setattr(json_slices, "STREAM_FROM", 0 if ranged else 1 << 40)
        monkeypatch.setattr(kineto_ranges, "RANGE_BYTES", 256)
        read = []
        real = kineto_ranges.read_range
        monkeypatch.setattr(kineto_ranges, "read_range",
                            lambda *a: read.append(a) or real(*a))
        clear_cache()
        checked = scan_file(src)
        out = tmp_path / f"out{int(ranged)}{''.join(src.suffixes)}"
        res = redact_file(src, out, paths=paths)
        copy = out.read_bytes()
        return ([(h.location, h.kind, h.raw) for h in checked.hits], checked.counts,
                [(h.location, h.kind, h.raw) for h in res.hits], res.counts, res.changed_cells,
                gzip.decompress(copy) if copy[:2] == b"\x1f\x8b" else copy), len(read)
    whole, n_whole = run(False)
    ranged, n_ranged = run(True)
    assert n_whole == 0 and n_ranged > 10
    assert ranged == whole
    if form == "clean":
        assert whole[4] == 0 and whole[5] == text         # nothing to scrub: the file verbatim
    else:
        assert whole[4] > 0 and not any(s.encode() in whole[5] for s in K.values())
