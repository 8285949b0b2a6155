defmodule Tokenizers do
  @moduledoc """
  Hugging Face tokenizers (`tokenizer.json`) in pure Elixir.

  A stand-in for the `tokenizers` Hex package (a Rust NIF) that implements
  the calls Bumblebee makes: `Tokenizers.Tokenizer` (load, encode, decode,
  truncation, vocabulary), `Tokenizers.Encoding` (ids, masks, offsets,
  padding) and `Tokenizers.PostProcessor.template/1`.

  Supported: models WordPiece, BPE (byte-level, suffix, byte fallback) and
  Unigram; normalizers BertNormalizer, NFC/NFD/NFKC/NFKD, Lowercase, Strip,
  StripAccents, Replace, Prepend, Sequence; pre-tokenizers BertPreTokenizer,
  Whitespace, WhitespaceSplit, ByteLevel, Split, Metaspace, Digits,
  Punctuation, Sequence; post-processors TemplateProcessing, BertProcessing,
  RobertaProcessing, ByteLevel, Sequence; decoders WordPiece, ByteLevel,
  Metaspace, BPEDecoder, ByteFallback, Fuse, Strip, Replace, Sequence; added
  tokens, truncation and padding. A file using anything else fails to load
  with `{:error, "unsupported ..."}`.
  """
end
