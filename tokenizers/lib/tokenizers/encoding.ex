defmodule Tokenizers.Encoding do
  @moduledoc """
  The result of encoding one input (or one pair of inputs).

  Offsets are UTF-8 byte ranges into the input text, as the Rust
  `tokenizers` library returns them to Elixir; in a pair, each sequence's
  offsets are relative to its own text.
  """

  defstruct ids: [],
            type_ids: [],
            tokens: [],
            offsets: [],
            special_tokens_mask: [],
            attention_mask: [],
            sequence_ids: []

  @type t :: %__MODULE__{}

  @doc false
  def new(tokens, type_id, sequence_id) do
    n = length(tokens)

    %__MODULE__{
      ids: Enum.map(tokens, &elem(&1, 0)),
      tokens: Enum.map(tokens, &elem(&1, 1)),
      offsets: Enum.map(tokens, &elem(&1, 2)),
      type_ids: List.duplicate(type_id, n),
      special_tokens_mask: List.duplicate(0, n),
      attention_mask: List.duplicate(1, n),
      sequence_ids: List.duplicate(sequence_id, n)
    }
  end

  @doc false
  def special(ids, tokens, type_id) do
    n = length(ids)

    %__MODULE__{
      ids: ids,
      tokens: tokens,
      offsets: List.duplicate({0, 0}, n),
      type_ids: List.duplicate(type_id, n),
      special_tokens_mask: List.duplicate(1, n),
      attention_mask: List.duplicate(1, n),
      sequence_ids: List.duplicate(nil, n)
    }
  end

  @doc false
  def merge(encodings) do
    fields = [
      :ids,
      :type_ids,
      :tokens,
      :offsets,
      :special_tokens_mask,
      :attention_mask,
      :sequence_ids
    ]

    Enum.reduce(fields, %__MODULE__{}, fn field, acc ->
      Map.put(acc, field, Enum.flat_map(encodings, &Map.fetch!(&1, field)))
    end)
  end

  @doc "Number of tokens."
  def n_tokens(%__MODULE__{ids: ids}), do: length(ids)

  def get_length(e), do: n_tokens(e)
  def get_ids(%__MODULE__{ids: ids}), do: ids
  def get_type_ids(%__MODULE__{type_ids: v}), do: v
  def get_attention_mask(%__MODULE__{attention_mask: v}), do: v
  def get_special_tokens_mask(%__MODULE__{special_tokens_mask: v}), do: v
  def get_tokens(%__MODULE__{tokens: v}), do: v
  def get_offsets(%__MODULE__{offsets: v}), do: v
  def get_sequence_ids(%__MODULE__{sequence_ids: v}), do: v
  def get_overflowing(%__MODULE__{}), do: []

  def get_u32_ids(e), do: u32(e.ids)
  def get_u32_type_ids(e), do: u32(e.type_ids)
  def get_u32_attention_mask(e), do: u32(e.attention_mask)
  def get_u32_special_tokens_mask(e), do: u32(e.special_tokens_mask)

  defp u32(list), do: for(x <- list, into: <<>>, do: <<x::unsigned-native-32>>)

  @doc """
  Pads to `target_length` tokens (no-op when already as long). Options:
  `:pad_id` (0), `:pad_type_id` (0), `:pad_token` ("[PAD]"), `:direction`
  (`:right` or `:left`). Padding has attention 0, special-token mask 1 and
  offsets `{0, 0}`.
  """
  def pad(%__MODULE__{} = e, target_length, opts \\ []) do
    n = target_length - n_tokens(e)

    if n <= 0 do
      e
    else
      pad = fn list, value ->
        padding = List.duplicate(value, n)
        if opts[:direction] == :left, do: padding ++ list, else: list ++ padding
      end

      %__MODULE__{
        ids: pad.(e.ids, Keyword.get(opts, :pad_id, 0)),
        type_ids: pad.(e.type_ids, Keyword.get(opts, :pad_type_id, 0)),
        tokens: pad.(e.tokens, Keyword.get(opts, :pad_token, "[PAD]")),
        offsets: pad.(e.offsets, {0, 0}),
        special_tokens_mask: pad.(e.special_tokens_mask, 1),
        attention_mask: pad.(e.attention_mask, 0),
        sequence_ids: pad.(e.sequence_ids, nil)
      }
    end
  end

  @doc """
  Keeps at most `max_length` tokens: the first ones (direction `:right`,
  the default) or the last ones (`:left`).
  """
  def truncate(%__MODULE__{} = e, max_length, opts \\ []) do
    n = n_tokens(e)

    if n <= max_length do
      e
    else
      keep =
        if opts[:direction] == :left,
          do: &Enum.drop(&1, n - max_length),
          else: &Enum.take(&1, max_length)

      Map.new(Map.from_struct(e), fn {k, v} -> {k, keep.(v)} end)
      |> then(&struct(__MODULE__, &1))
    end
  end
end
