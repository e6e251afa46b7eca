"""The built-in engine's tokenizer: byte-level (ids 0-255 are the UTF-8 bytes of the text), with a
few special tokens after the bytes and a chat template that turns OpenAI messages into a prompt.

    tok = ByteTokenizer()
    ids = tok.encode("héllo")                 # [BOS, 104, 195, 169, 108, 108, 111]
    tok.decode(ids)                           # "héllo" (special tokens skipped)
    tok.apply_chat_template([{"role": "user", "content": "hi"}])
    # "<|bos|><|user|>hi<|end|>\n<|assistant|>"

Like Hugging Face tokenizers, `encode` reads the text of a special token ("<|user|>") as that
token, so a chat template can be a string. Any byte string round-trips: `decode(encode(t)) == t`
for every `t` without special-token text in it.

Threading: immutable after construction; any thread. `IncrementalDecoder` is per request.
Cost: O(length) per call.
"""

from __future__ import annotations

import codecs
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

NUM_BYTES = 256
# The special tokens, in id order after the 256 bytes. Changing this order changes every saved
# model's vocabulary: append only.
SPECIAL_TOKENS = ("<|bos|>", "<|eos|>", "<|pad|>", "<|system|>", "<|user|>", "<|assistant|>",
                  "<|end|>")
TOKENIZER_TYPE = "tessera-byte"
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")


class ByteTokenizer:
    """Bytes plus SPECIAL_TOKENS; `bos_token_id`, `eos_token_id`, `pad_token_id`, `vocab_size`."""

    def __init__(self, special_tokens: Sequence[str] = SPECIAL_TOKENS) -> None:
        self.special_tokens = tuple(special_tokens)
        if len(set(self.special_tokens)) != len(self.special_tokens):
            raise ValueError(f"special tokens must be distinct, got {list(self.special_tokens)}")
        self._special_ids: Dict[str, int] = {
            text: NUM_BYTES + i for i, text in enumerate(self.special_tokens)}
        self.vocab_size = NUM_BYTES + len(self.special_tokens)
        # Longest first, so that no special token's text is split at a shorter one inside it.
        alternatives = sorted(self.special_tokens, key=len, reverse=True)
        self._special_pattern = re.compile("|".join(re.escape(t) for t in alternatives))
        self.bos_token_id = self.token_to_id("<|bos|>")
        self.eos_token_id = self.token_to_id("<|eos|>")
        self.pad_token_id = self.token_to_id("<|pad|>")

    def token_to_id(self, text: str) -> int:
        if text not in self._special_ids:
            raise KeyError(f"unknown special token {text!r}")
        return self._special_ids[text]

    def is_special(self, token_id: int) -> bool:
        return token_id >= NUM_BYTES

    def encode(self, text: str, add_bos: bool = True) -> List[int]:
        """The ids of `text` (special tokens' text read as those tokens), after BOS when
        `add_bos` and the text does not already start with it."""
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}")
        ids: List[int] = []
        position = 0
        for match in self._special_pattern.finditer(text):
            ids.extend(text[position:match.start()].encode("utf-8"))
            ids.append(self._special_ids[match.group(0)])
            position = match.end()
        ids.extend(text[position:].encode("utf-8"))
        if add_bos and (not ids or ids[0] != self.bos_token_id):
            ids.insert(0, self.bos_token_id)
        return ids

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """The text of `ids`; invalid UTF-8 becomes U+FFFD."""
        out: List[str] = []
        pending = bytearray()
        for token_id in ids:
            self._check_id(token_id)
            if token_id < NUM_BYTES:
                pending.append(token_id)
                continue
            out.append(pending.decode("utf-8", errors="replace"))
            pending.clear()
            if not skip_special_tokens:
                out.append(self.special_tokens[token_id - NUM_BYTES])
        out.append(pending.decode("utf-8", errors="replace"))
        return "".join(out)

    def apply_chat_template(self, messages: Sequence[Mapping[str, Any]],
                            add_generation_prompt: bool = True) -> str:
        """The prompt of OpenAI chat `messages`: each as `<|role|>content<|end|>` and a newline
        (developer reads as system, tool as user), then `<|assistant|>` to be continued."""
        parts = ["<|bos|>"]
        for i, message in enumerate(messages):
            role = message.get("role")
            if role not in CHAT_ROLES:
                raise ValueError(f"messages[{i}].role must be one of {', '.join(CHAT_ROLES)}, "
                                 f"got {role!r}")
            marker = {"developer": "system", "tool": "user"}.get(role, role)
            parts.append(f"<|{marker}|>{message_text(message.get('content'))}<|end|>\n")
        if add_generation_prompt:
            parts.append("<|assistant|>")
        return "".join(parts)

    def to_dict(self) -> Dict[str, Any]:
        """What tokenizer.json holds; `from_dict` reads it back."""
        return {"type": TOKENIZER_TYPE, "num_bytes": NUM_BYTES,
                "special_tokens": list(self.special_tokens), "chat_template": "tessera-roles"}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ByteTokenizer":
        if data.get("type") != TOKENIZER_TYPE or data.get("num_bytes") != NUM_BYTES:
            raise ValueError(f"not a {TOKENIZER_TYPE} tokenizer description: "
                             f"type={data.get('type')!r}, num_bytes={data.get('num_bytes')!r}")
        return cls(data["special_tokens"])

    def _check_id(self, token_id: int) -> None:
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(f"token id {token_id} is outside the vocabulary (0..."
                             f"{self.vocab_size - 1})")


def message_text(content: Any) -> str:
    """The text of a chat message's `content`: a string, None (""), or OpenAI content parts
    ({"type": "text", "text": ...}; other part types carry no text for this model)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content
                       if isinstance(part, dict) and part.get("type") == "text")
    raise ValueError(f"message content must be a string or a list of parts, got "
                     f"{type(content).__name__}")


class IncrementalDecoder:
    """Text of one request's output as tokens arrive: a multi-byte character split across
    tokens comes out once it is whole, so no delta ends in half a character."""

    def __init__(self, tokenizer: ByteTokenizer, skip_special_tokens: bool = True) -> None:
        self._tokenizer = tokenizer
        self._skip = skip_special_tokens
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token_id: int) -> str:
        """The text that `token_id` completes (possibly "")."""
        self._tokenizer._check_id(token_id)
        if token_id < NUM_BYTES:
            return self._utf8.decode(bytes([token_id]))
        flushed = self._utf8.decode(b"", final=True)
        self._utf8.reset()
        if self._skip:
            return flushed
        return flushed + self._tokenizer.special_tokens[token_id - NUM_BYTES]

    def flush(self) -> str:
        """Whatever incomplete character is left, as U+FFFD (at the end of a request)."""
        text = self._utf8.decode(b"", final=True)
        self._utf8.reset()
        return text


def load_tokenizer(data: Optional[Mapping[str, Any]] = None) -> ByteTokenizer:
    """The tokenizer a model directory describes (its tokenizer.json), or the default one."""
    return ByteTokenizer() if data is None else ByteTokenizer.from_dict(data)
