defmodule Tokenizers.Model.BPE do
  @moduledoc false
  # Byte-pair encoding: the word starts as one symbol per character (or per
  # byte token with byte_fallback, or unknown), then the adjacent pair with
  # the lowest merge rank (the leftmost among equals) is merged until none
  # is in the merge table.

  defstruct [
    :vocab,
    :vocab_r,
    :merges,
    :unk_token,
    :fuse_unk,
    :byte_fallback,
    :prefix,
    :suffix,
    :ignore_merges
  ]

  def new(json) do
    vocab = json["vocab"]
    prefix = json["continuing_subword_prefix"]
    prefix_len = if prefix, do: byte_size(prefix), else: 0

    merges =
      json["merges"]
      |> Enum.with_index()
      |> Map.new(fn {merge, rank} ->
        {a, b} = merge_pair(merge)
        b_rest = binary_part(b, min(prefix_len, byte_size(b)), max(byte_size(b) - prefix_len, 0))

        case {vocab[a], vocab[b], vocab[a <> b_rest]} do
          {a_id, b_id, new_id}
          when is_integer(a_id) and is_integer(b_id) and is_integer(new_id) ->
            {{a_id, b_id}, {rank, new_id}}

          _ ->
            throw(
              {:unsupported, "BPE merge #{inspect(merge)} uses tokens outside the vocabulary"}
            )
        end
      end)

    %__MODULE__{
      vocab: vocab,
      vocab_r: Map.new(vocab, fn {t, i} -> {i, t} end),
      merges: merges,
      unk_token: json["unk_token"],
      fuse_unk: json["fuse_unk"] == true,
      byte_fallback: json["byte_fallback"] == true,
      prefix: prefix,
      suffix: json["end_of_word_suffix"],
      ignore_merges: json["ignore_merges"] == true
    }
  end

  defp merge_pair([a, b]), do: {a, b}

  defp merge_pair(line) when is_binary(line) do
    case String.split(line, " ") do
      [a, b] -> {a, b}
      _ -> throw({:unsupported, "BPE merge #{inspect(line)}"})
    end
  end

  def tokenize(_model, ""), do: []

  def tokenize(model, word) do
    case model.ignore_merges && Map.fetch(model.vocab, word) do
      {:ok, id} ->
        [{id, 0, byte_size(word)}]

      _ ->
        word
        |> initial_symbols(model)
        |> merge_all(model.merges)
        |> with_offsets(0, [])
    end
  end

  # Symbols {id, byte_length}, as HF's merge_word builds them.
  defp initial_symbols(word, model) do
    chars = String.codepoints(word)
    last = length(chars) - 1

    {symbols, unk} =
      chars
      |> Enum.with_index()
      |> Enum.reduce({[], nil}, fn {char, i}, {acc, unk} ->
        s = if i > 0 and model.prefix, do: model.prefix <> char, else: char
        s = if i == last and model.suffix, do: s <> model.suffix, else: s
        len = byte_size(char)

        case Map.fetch(model.vocab, s) do
          {:ok, id} ->
            {[{id, len} | flush(unk, acc)], nil}

          :error ->
            case model.byte_fallback && byte_tokens(model, s) do
              ids when is_list(ids) ->
                {Enum.reverse(Enum.map(ids, &{&1, 1})) ++ acc, unk}

              _ ->
                unknown(model, len, acc, unk)
            end
        end
      end)

    Enum.reverse(flush(unk, symbols))
  end

  defp flush(nil, acc), do: acc
  defp flush(unk, acc), do: [unk | acc]

  defp unknown(%{unk_token: nil}, _len, acc, unk), do: {acc, unk}

  defp unknown(model, len, acc, unk) do
    unk_id =
      Map.get(model.vocab, model.unk_token) ||
        throw(
          {:encode, "BPE: unknown token #{inspect(model.unk_token)} is not in the vocabulary"}
        )

    case unk do
      {id, n} when model.fuse_unk -> {acc, {id, n + len}}
      nil -> {acc, {unk_id, len}}
      other -> {[other | acc], {unk_id, len}}
    end
  end

  defp byte_tokens(model, s) do
    ids = for <<b <- s>>, do: Map.get(model.vocab, byte_token(b))
    if Enum.all?(ids, &is_integer/1), do: ids, else: nil
  end

  defp byte_token(b) do
    hex = b |> Integer.to_string(16) |> String.pad_leading(2, "0")
    "<0x" <> hex <> ">"
  end

  defp merge_all(symbols, merges) do
    case best_pair(symbols, merges, 0, nil) do
      nil -> symbols
      {pos, _rank, new_id} -> symbols |> merge_at(pos, new_id) |> merge_all(merges)
    end
  end

  defp best_pair([{a, _}, {b, _} = next | rest], merges, pos, best) do
    best =
      case merges do
        %{{^a, ^b} => {rank, new_id}} ->
          case best do
            {_, best_rank, _} when best_rank <= rank -> best
            _ -> {pos, rank, new_id}
          end

        _ ->
          best
      end

    best_pair([next | rest], merges, pos + 1, best)
  end

  defp best_pair(_, _merges, _pos, best), do: best

  defp merge_at([{_, l1}, {_, l2} | rest], 0, new_id), do: [{new_id, l1 + l2} | rest]
  defp merge_at([s | rest], pos, new_id), do: [s | merge_at(rest, pos - 1, new_id)]

  defp with_offsets([], _pos, acc), do: Enum.reverse(acc)

  defp with_offsets([{id, len} | rest], pos, acc),
    do: with_offsets(rest, pos + len, [{id, pos, pos + len} | acc])
end
