defmodule Tokenizers.Model do
  @moduledoc false
  # The `model` of tokenizer.json. A model turns one pre-tokenized word
  # (a binary) into tokens `{id, start, stop}`, byte offsets in the word.

  alias Tokenizers.Model.{BPE, Unigram, WordPiece}

  def from_json(%{"type" => "WordPiece"} = json), do: WordPiece.new(json)
  def from_json(%{"type" => "BPE"} = json), do: BPE.new(json)
  def from_json(%{"type" => "Unigram"} = json), do: Unigram.new(json)

  def from_json(%{"vocab" => _, "merges" => _} = json), do: BPE.new(json)

  def from_json(%{"type" => other}), do: throw({:unsupported, "model #{other}"})

  def from_json(%{"vocab" => vocab} = json) when is_map(vocab),
    do: WordPiece.new(json)

  def tokenize(%mod{} = model, word), do: mod.tokenize(model, word)

  def token_to_id(%{vocab: vocab}, token), do: Map.get(vocab, token)
  def id_to_token(%{vocab_r: vocab_r}, id), do: Map.get(vocab_r, id)
  def vocab_size(%{vocab: vocab}), do: map_size(vocab)
end

defmodule Tokenizers.Model.WordPiece do
  @moduledoc false
  # Greedy longest-match-first: the longest vocabulary prefix of the rest of
  # the word, continuation pieces carrying the `##` prefix; a word with no
  # such split, or longer than max_input_chars_per_word, is one unknown token.

  defstruct [:vocab, :vocab_r, :unk_token, :prefix, :max_chars]

  def new(json) do
    vocab = json["vocab"]

    %__MODULE__{
      vocab: vocab,
      vocab_r: Map.new(vocab, fn {t, i} -> {i, t} end),
      unk_token: json["unk_token"] || "[UNK]",
      prefix: json["continuing_subword_prefix"] || "##",
      max_chars: json["max_input_chars_per_word"] || 100
    }
  end

  def tokenize(model, word) do
    if char_count(word) > model.max_chars do
      unk(model, word)
    else
      case pieces(model, word, 0, []) do
        :error -> unk(model, word)
        tokens -> tokens
      end
    end
  end

  defp unk(model, word) do
    case Map.fetch(model.vocab, model.unk_token) do
      {:ok, id} ->
        [{id, 0, byte_size(word)}]

      :error ->
        throw(
          {:encode,
           "WordPiece: unknown token #{inspect(model.unk_token)} is not in the vocabulary"}
        )
    end
  end

  defp pieces(_model, word, start, acc) when start >= byte_size(word), do: Enum.reverse(acc)

  defp pieces(model, word, start, acc) do
    rest = binary_part(word, start, byte_size(word) - start)
    prefix = if start > 0, do: model.prefix, else: ""

    case longest(model.vocab, prefix, rest, byte_size(rest)) do
      nil -> :error
      {id, len} -> pieces(model, word, start + len, [{id, start, start + len} | acc])
    end
  end

  defp longest(_vocab, _prefix, _rest, 0), do: nil

  defp longest(vocab, prefix, rest, len) do
    case Map.fetch(vocab, prefix <> binary_part(rest, 0, len)) do
      {:ok, id} -> {id, len}
      :error -> longest(vocab, prefix, rest, previous_boundary(rest, len))
    end
  end

  # The byte length of `rest` up to the start of its last character before `len`.
  defp previous_boundary(rest, len) do
    len = len - 1

    if len > 0 and continuation?(:binary.at(rest, len)),
      do: previous_boundary(rest, len),
      else: len
  end

  defp continuation?(byte), do: Bitwise.band(byte, 0xC0) == 0x80

  defp char_count(word), do: for(<<b <- word>>, not continuation?(b), reduce: 0, do: (n -> n + 1))
end
