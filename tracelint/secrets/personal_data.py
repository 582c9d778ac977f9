"""Personal data: user and host name keys, home directories, e-mail and IP addresses, and
the values that are not personal (root, localhost, markers). The heuristics as a whole:
patterns.py."""
from __future__ import annotations

import re

from .credential_names import is_marker

USER_KEYS = frozenset({
    "USER", "LOGNAME", "USERNAME", "SUDO_USER", "SLURM_JOB_USER", "PBS_O_LOGNAME", "LSB_USER",
    "EXPORT_USER", "GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "username", "user_name",
    "tw_user", "userName", "user"})
HOST_KEYS = frozenset({
    "HOSTNAME", "HOST", "COMPUTERNAME", "EXPORT_HOST", "Hostname", "DEVICE_DISPLAY_NAME",
    "SLURMD_NODENAME", "SLURM_SUBMIT_HOST", "SLURM_TOPOLOGY_ADDR", "SLURM_NODELIST",
    "SLURM_JOB_NODELIST", "SLURM_STEP_NODELIST", "PBS_O_HOST", "SSH_CONNECTION",
    "SSH_CLIENT", "host_name", "hostname", "hostName", "host"})
NOT_PERSONAL = frozenset({"root", "localhost", "localhost.localdomain", "(null)", "null",
                          "none", "unknown", "local", "local (cli)", "127.0.0.1", "::1"})
NAME_STOPLIST = frozenset({
    "root", "user", "users", "admin", "ubuntu", "debian", "centos", "fedora", "nvidia", "cuda",
    "torch", "python", "docker", "runner", "jenkins", "test", "tests", "guest", "nobody",
    "home", "shared", "local", "linux", "default", "public", "work", "workspace", "data",
    "build", "master", "main", "node", "host", "server", "train", "model", "kernel", "device",
    "true", "false", "none", "null", "unknown"})
HOME_RE = re.compile(
    r"(?<![\w.\-/])(?:/home|/Users|/usr/home|/export/home|/shared/home|/data/home|/mnt/home|"
    r"/gpfs/home|/global/homes/[a-z]|/global/u[0-9]/[a-z]|/var/mail|/var/spool/mail)"
    r"/([A-Za-z0-9_][A-Za-z0-9._\-]*)"
    r"|(?<![\w])[A-Za-z]:[\\/]+(?:Users|Documents and Settings)[\\/]+([A-Za-z0-9_][A-Za-z0-9._\- ]*?)(?=[\\/]|$|[\s\"'\x00])")
HOME_SKIP = frozenset({"shared", "public", "default", "all users", "default user",
                        "linuxbrew", "user", "username", "runner"})
EMAIL_RE = re.compile(r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,24}\b")
IP_RE = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b|\b[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{0,4}){2,7}\b")


def personal_key_kind(name: str | None, path_hint: str = "") -> str | None:
    if not name:
        return None
    if name in USER_KEYS:
        return "user-name"
    if name in HOST_KEYS:
        return "host-name"
    if name == "node" and path_hint.endswith("uname"):
        return "host-name"
    return None


def personal_value_ok(value: str) -> bool:
    v = value.strip().strip("\"'")
    return bool(v) and v.lower() not in NOT_PERSONAL and not is_marker(v) and len(v) <= 256
