defmodule Tokenizers.AddedVocabulary do
  @moduledoc false
  # The `added_tokens` of tokenizer.json. Before normalization the input is
  # cut at the added tokens marked `normalized: false` (matched in the
  # input as written); each remaining part is normalized and cut at the
  # others (matched in the normalized text, against their normalized
  # content). Matches are leftmost-longest (`:binary.matches`), as
  # Aho-Corasick's leftmost-longest mode finds them in HF.

  alias Tokenizers.{Normalizer, Text, Unicode}

  defstruct by_content: %{}, by_id: %{}, special: MapSet.new(), raw: nil, normalized: nil

  def new(tokens, normalizer) do
    tokens =
      Enum.map(tokens, fn t ->
        %{
          id: t["id"],
          content: t["content"],
          special: t["special"] == true,
          lstrip: t["lstrip"] == true,
          rstrip: t["rstrip"] == true,
          single_word: t["single_word"] == true,
          normalized: Map.get(t, "normalized", not (t["special"] == true))
        }
      end)

    {normalized, raw} = Enum.split_with(tokens, & &1.normalized)

    normalized =
      Enum.map(normalized, fn t ->
        %{
          t
          | content:
              t.content
              |> Text.new()
              |> then(&Normalizer.normalize(normalizer, &1))
              |> Text.to_binary()
        }
      end)

    %__MODULE__{
      by_content: Map.new(tokens, &{&1.content, &1.id}),
      by_id: Map.new(tokens, &{&1.id, &1.content}),
      special: tokens |> Enum.filter(& &1.special) |> MapSet.new(& &1.content),
      raw: matcher(raw),
      normalized: matcher(normalized)
    }
  end

  defp matcher(tokens) do
    tokens = Enum.reject(tokens, &(&1.content == ""))

    if tokens == [] do
      nil
    else
      # the last token added with a given content wins, as in HF's map
      by_content = Map.new(tokens, &{&1.content, &1})
      {:binary.compile_pattern(Map.keys(by_content)), by_content}
    end
  end

  def special?(%__MODULE__{special: special}, content), do: MapSet.member?(special, content)

  @doc """
  Cuts a text at the added tokens of `which` (:raw or :normalized) into
  `{:token, id, text}` and `{:text, text}` parts (empty ones dropped).
  """
  def split(%__MODULE__{} = av, which, text) do
    case Map.fetch!(av, which) do
      nil -> non_empty([{:text, text}])
      {pattern, by_content} -> split_text(text, pattern, by_content)
    end
  end

  defp non_empty(parts), do: Enum.reject(parts, &match?({:text, []}, &1))

  defp split_text([], _pattern, _by_content), do: []

  defp split_text(text, pattern, by_content) do
    bin = Text.to_binary(text)

    case :binary.matches(bin, pattern) do
      [] ->
        [{:text, text}]

      matches ->
        ranges = resolve(bin, matches, by_content, 0, [])
        {parts, rest, _} = Enum.reduce(ranges, {[], text, 0}, &cut/2)
        non_empty(Enum.reverse([{:text, rest} | parts]))
    end
  end

  # HF's find_matches: drops single-word tokens inside words, widens lstrip
  # and rstrip tokens over the neighbouring whitespace.
  defp resolve(_bin, [], _by_content, _start_offset, acc), do: Enum.reverse(acc)

  defp resolve(bin, [{start, len} | matches], by_content, start_offset, acc) do
    stop = start + len
    token = Map.fetch!(by_content, binary_part(bin, start, len))
    before = binary_part(bin, 0, start)
    after_ = binary_part(bin, stop, byte_size(bin) - stop)

    if token.single_word and (word_char?(last_char(before)) or word_char?(first_char(after_))) do
      resolve(bin, matches, by_content, start_offset, acc)
    else
      # the whitespace an lstrip/rstrip token absorbs belongs to no token
      cut_start =
        if token.lstrip, do: max(start - trailing_space(before), start_offset), else: start

      cut_stop = if token.rstrip, do: stop + leading_space(after_), else: stop

      resolve(bin, matches, by_content, cut_stop, [
        {cut_start, start, stop, cut_stop, token.id} | acc
      ])
    end
  end

  defp last_char(""), do: nil
  defp last_char(bin), do: bin |> String.to_charlist() |> List.last()
  defp first_char(<<cp::utf8, _::binary>>), do: cp
  defp first_char(_), do: nil

  defp word_char?(nil), do: false
  defp word_char?(cp), do: cp == ?_ or Unicode.alphanumeric?(cp)

  defp trailing_space(bin) do
    bin
    |> String.to_charlist()
    |> Enum.reverse()
    |> Enum.take_while(&Unicode.whitespace?/1)
    |> Enum.reduce(0, &(&2 + Unicode.utf8_size(&1)))
  end

  defp leading_space(bin) do
    bin
    |> String.to_charlist()
    |> Enum.take_while(&Unicode.whitespace?/1)
    |> Enum.reduce(0, &(&2 + Unicode.utf8_size(&1)))
  end

  # Cuts the remaining text (which starts at byte pos) at one token's range.
  defp cut({cut_start, start, stop, cut_stop, id}, {parts, text, pos}) do
    {before, text} = take(text, cut_start - pos, [])
    {_, text} = take(text, start - cut_start, [])
    {token, text} = take(text, stop - start, [])
    {_, text} = take(text, cut_stop - stop, [])
    {[{:token, id, token}, {:text, before} | parts], text, cut_stop}
  end

  defp take(text, n, acc) when n <= 0, do: {Enum.reverse(acc), text}

  defp take([{cp, _, _} = c | rest], n, acc), do: take(rest, n - Unicode.utf8_size(cp), [c | acc])
  defp take([], _n, acc), do: {Enum.reverse(acc), []}
end
