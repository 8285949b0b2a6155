defmodule Tokenizers.Model.Unigram do
  @moduledoc false
  # Unigram language model: the segmentation of the word with the highest
  # total log-probability (Viterbi over every vocabulary piece that starts
  # at each character). A character no piece covers is unknown, scored
  # min_score - 10; adjacent unknowns fuse into one token.

  import Bitwise

  defstruct [:vocab, :vocab_r, :scores, :prefixes, :unk_id, :min_score, :byte_fallback]

  @unk_penalty 10.0

  def new(json) do
    pieces = json["vocab"]

    {vocab, scores} =
      pieces
      |> Enum.with_index()
      |> Enum.reduce({%{}, %{}}, fn {[piece, score], id}, {vocab, scores} ->
        {Map.put(vocab, piece, id), Map.put(scores, id, score * 1.0)}
      end)

    # every prefix of every piece: the search from a position stops at the
    # first substring that no piece starts with
    prefixes =
      Enum.reduce(pieces, %{}, fn [piece, _], acc ->
        Enum.reduce(1..byte_size(piece)//1, acc, fn n, acc ->
          Map.put_new(acc, binary_part(piece, 0, n), true)
        end)
      end)

    %__MODULE__{
      vocab: vocab,
      vocab_r: Map.new(vocab, fn {t, i} -> {i, t} end),
      scores: scores,
      prefixes: prefixes,
      unk_id: json["unk_id"],
      min_score: scores |> Map.values() |> Enum.min(fn -> 0.0 end),
      byte_fallback: json["byte_fallback"] == true
    }
  end

  def tokenize(_model, ""), do: []

  def tokenize(model, word) do
    size = byte_size(word)
    unk_score = model.min_score - @unk_penalty
    # best[pos] = {score, start, id} of the best path ending at byte pos
    best = viterbi(model, word, 0, size, unk_score, %{0 => {0.0, nil, nil}})

    word
    |> backtrack(model, best, size, [], [])
    |> to_tokens(model, 0, [])
  end

  defp viterbi(_model, _word, pos, size, _unk_score, best) when pos >= size, do: best

  defp viterbi(model, word, pos, size, unk_score, best) do
    {here, _, _} = Map.fetch!(best, pos)
    mblen = char_len(:binary.at(word, pos))

    {best, single} =
      candidates(model, word, pos, 1, size - pos, [])
      |> Enum.reduce({best, false}, fn {len, id}, {best, single} ->
        {relax(best, pos + len, model.scores[id] + here, pos, id), single or len == mblen}
      end)

    best =
      if single do
        best
      else
        unk_id =
          model.unk_id ||
            throw({:encode, "Unigram: a character is not covered and there is no unk_id"})

        relax(best, pos + mblen, unk_score + here, pos, unk_id)
      end

    viterbi(model, word, pos + mblen, size, unk_score, best)
  end

  defp relax(best, target, score, start, id) do
    case best do
      %{^target => {old, _, _}} when old >= score -> best
      _ -> Map.put(best, target, {score, start, id})
    end
  end

  # Pieces starting at pos, shortest first: {byte_length, id}.
  defp candidates(_model, _word, _pos, len, max, acc) when len > max, do: Enum.reverse(acc)

  defp candidates(model, word, pos, len, max, acc) do
    sub = binary_part(word, pos, len)

    if Map.has_key?(model.prefixes, sub) do
      acc =
        case model.vocab do
          %{^sub => id} -> [{len, id} | acc]
          _ -> acc
        end

      candidates(model, word, pos, len + 1, max, acc)
    else
      Enum.reverse(acc)
    end
  end

  defp char_len(b) when b < 0x80, do: 1
  defp char_len(b) when (b &&& 0xE0) == 0xC0, do: 2
  defp char_len(b) when (b &&& 0xF0) == 0xE0, do: 3
  defp char_len(_), do: 4

  # Walks the best path back; unknown runs fuse into one string.
  defp backtrack(_word, _model, _best, 0, unks, acc), do: flush_unk(unks, acc)

  defp backtrack(word, model, best, stop, unks, acc) do
    {_, start, id} = Map.fetch!(best, stop)
    piece = binary_part(word, start, stop - start)

    if id == model.unk_id do
      backtrack(word, model, best, start, [piece | unks], acc)
    else
      backtrack(word, model, best, start, [], [piece | flush_unk(unks, acc)])
    end
  end

  defp flush_unk([], acc), do: acc
  defp flush_unk(unks, acc), do: [IO.iodata_to_binary(unks) | acc]

  defp to_tokens([], _model, _pos, acc), do: Enum.reverse(acc)

  defp to_tokens([piece | rest], model, pos, acc) do
    len = byte_size(piece)

    acc =
      case model.vocab do
        %{^piece => id} ->
          [{id, pos, pos + len} | acc]

        _ ->
          case model.byte_fallback && byte_ids(model, piece) do
            ids when is_list(ids) -> Enum.reduce(ids, acc, &[{&1, pos, pos + len} | &2])
            _ -> [{model.unk_id, pos, pos + len} | acc]
          end
      end

    to_tokens(rest, model, pos + len, acc)
  end

  defp byte_ids(model, piece) do
    ids =
      for <<b <- piece>> do
        hex = b |> Integer.to_string(16) |> String.pad_leading(2, "0")
        Map.get(model.vocab, "<0x" <> hex <> ">")
      end

    if Enum.all?(ids, &is_integer/1), do: ids, else: nil
  end
end
