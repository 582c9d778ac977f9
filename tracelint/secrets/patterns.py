"""What looks like a secret, or like personal data, in a trace string: the heuristics.

Traces are full of text the profiler copied from the machine: environment blocks (nsys keeps
every traced process's environment in ``StringIds``, the target's in
``TARGET_INFO_SYSTEM_ENV``), export metadata (``META_DATA_*``: user, host, absolute paths),
tool metadata in Kineto JSON (``metadata.system.env``, ``username``, ``host_name``), user
annotation names and Python frames. This module decides, for one string, which spans are
secrets (severity error) and which are personal data (severity info), and masks them.

Secrets (category "secret")
---------------------------
1. **Well-known token shapes, anywhere in any string** (``TOKEN_SHAPES``): AWS access key ids
   (``AKIA``/``ASIA`` + 16), GitHub (``ghp_ gho_ ghu_ ghs_ ghr_`` + 36, ``github_pat_``),
   GitLab ``glpat-``, Hugging Face ``hf_`` + 30 or more, Slack ``xox?-`` tokens and webhook URLs,
   Anthropic ``sk-ant-…``, OpenAI ``sk-…``/``sk-proj-…`` (the body must mix letters and digits,
   so ``sk-learn-something`` is not one), Stripe ``sk_live_``/``rk_live_``, Google ``AIza`` + 35,
   npm ``npm_``, PyPI ``pypi-AgE…``, JWTs (``eyJ….eyJ….sig``), ``Bearer <token>`` and
   ``Authorization: Basic|Token <token>``, passwords in URLs (``scheme://user:PASS@host``),
   signed-URL query parameters (``?token=``, ``&X-Amz-Signature=``, …) and PEM
   ``-----BEGIN … PRIVATE KEY-----`` blocks (up to the END line, a NUL or the end of the string).
   A token must start at a word boundary (``my_hf_…`` or ``task-…`` never match).
2. **Credential-looking names with a non-trivial value**: ``NAME=VALUE`` at the start of a
   line / NUL-separated segment (environment blocks), a JSON object key and its string value,
   a (name, value) row of a key/value table (``META_DATA_*``, ``TARGET_INFO_SYSTEM_ENV``), or an
   inline ``name=value`` / ``name: value`` / ``--name value`` in free text. The name is split into
   words (``_ - .`` and camelCase): *strong* words are ``token secret password passwd passphrase
   credential(s) creds`` and compounds such as ``apikey accesskey privatekey authtoken``, or
   ``key`` right after ``api access secret private signing encryption master client session
   account service license``; *weak* words are a lone ``key``, ``auth`` or ``private``.
   A name is **not** a credential when:
   - its last word says the value is a reference or a setting, not the secret itself
     (``REFERENCE_WORDS``: path, file, dir, sock, url, host, port, id, name, type, mode, size,
     version, timeout, enable(d), parallelism, …): ``SSH_AUTH_SOCK``, ``KEY_PATH=/etc/…``,
     ``HF_TOKEN_PATH``, ``TOKENIZERS_PARALLELISM`` (whose word is not even ``token``);
   - it names a tokenizer's special token (``pad_token``, ``eos_token``, ``bos_token``, …);
   - it is a known public value (``GPG_KEY`` of the official Python images, a fingerprint).
   A value is **trivial** (never a secret) when it is empty, a redaction marker (``<redacted…>``,
   ``[REDACTED]``, ``REDACTED``, ``***``, ``xxxx``, ``<hidden>``, ``none``, ``null``, ``n/a``), a
   boolean (true/false/yes/no/on/off/enabled/…), a number of at most 8 digits, shorter than 4
   characters, a filesystem path (``/…``, ``~/…``, ``./…``, ``C:\\…``; not when it holds ``@ + =``,
   which base64 secrets and URLs with credentials do), a variable reference
   (``$VAR``, ``${VAR}``, ``%VAR%``), a version number (``==3.3.1``, ``v2.1.0-rc1``), a URL
   without credentials or signed query parameters, or a tokenizer special token
   (``<|endoftext|>``, ``[PAD]``).
   Weak names (and any name in free text that is not upper-case environment style) need more:
   the value must *look random* — at least 16 characters of a token alphabet with upper case,
   lower case and digits, or at least 32 hex digits. Strong names in free text need 6 or more
   characters.

Personal data (category "personal", severity info)
--------------------------------------------------
- home directories: ``/home/NAME``, ``/Users/NAME``, ``/export/home``, ``/shared/home``,
  ``/global/homes/x/NAME``, ``/var/mail/NAME``, ``C:\\Users\\NAME`` (placeholders such as
  ``<user>``, ``$USER``, ``Shared``, ``Public`` are skipped);
- user names: values of ``USER LOGNAME USERNAME SUDO_USER SLURM_JOB_USER EXPORT_USER
  username user_name tw_user`` …;
- host names: values of ``HOSTNAME EXPORT_HOST Hostname DEVICE_DISPLAY_NAME host_name
  SLURMD_NODENAME SLURM_SUBMIT_HOST …``, ``uname.node``, and the addresses in
  ``SSH_CONNECTION``/``SSH_CLIENT``;
- e-mail addresses anywhere.
``root``, ``localhost`` and markers are not personal. With ``paths=True`` the redactor also
replaces, in every string, other whole-word occurrences of the user and host names found this
way (names of 4 or more characters that are not common words, see ``NAME_STOPLIST``).

Nothing here ever returns the secret text to a caller that prints: ``mask()`` gives a short
public prefix and the length (``hf_a…(37 chars)``).

This module is the heuristics' one public face (``from . import patterns as P``); the code
lives by section: kinds.py (categories, kinds, Match, markers), token_shapes.py (1.),
credential_names.py (2.), personal_data.py (personal data), text_scan.py (one string ->
matches) and masking.py (mask, replace, scrub).
"""
from __future__ import annotations

from .credential_names import (KEY_QUALIFIERS, NON_SECRET_NAMES, REFERENCE_WORDS,
                               SPECIAL_TOKEN_WORDS, STRONG_WORDS, WEAK_WORDS,
                               credential_strength, env_style_name, is_marker,
                               is_trivial_value, looks_random, name_words, value_is_secret)
from .kinds import (EMAIL_MARK, HOST_MARK, KIND_LABELS, PERSONAL, PERSONAL_MARKS, REDACTED,
                    SECRET, USER_MARK, Match)
from .masking import NameSet, apply, mask, replacement, scrub_string
from .personal_data import HOST_KEYS, NAME_STOPLIST, NOT_PERSONAL, USER_KEYS, personal_key_kind
from .text_scan import (BENIGN_JSON_KEYS, JSON_KEY_NEEDLES, PERSONAL_NEEDLES, SECRET_NEEDLES,
                        containing, find_matches, find_matches_cached, matching, suspect, suspects)
from .token_shapes import TOKEN_SHAPES

__all__ = [
    "BENIGN_JSON_KEYS", "EMAIL_MARK", "HOST_KEYS", "HOST_MARK", "JSON_KEY_NEEDLES", "KEY_QUALIFIERS",
    "KIND_LABELS", "Match", "NAME_STOPLIST", "NON_SECRET_NAMES", "NOT_PERSONAL", "NameSet",
    "PERSONAL", "PERSONAL_MARKS", "PERSONAL_NEEDLES", "REDACTED", "REFERENCE_WORDS", "SECRET",
    "SECRET_NEEDLES", "SPECIAL_TOKEN_WORDS", "STRONG_WORDS", "TOKEN_SHAPES", "USER_KEYS",
    "USER_MARK", "WEAK_WORDS", "apply", "containing", "credential_strength", "env_style_name",
    "find_matches", "find_matches_cached", "is_marker", "is_trivial_value", "looks_random",
    "mask", "matching", "name_words", "personal_key_kind", "replacement", "scrub_string",
    "suspect", "suspects", "value_is_secret"]
