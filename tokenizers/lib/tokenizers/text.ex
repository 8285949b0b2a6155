defmodule Tokenizers.Text do
  @moduledoc false
  # Text that remembers where each of its characters came from.
  #
  # A text is a list of `{code_point, start, stop}`: the character and the
  # UTF-8 byte range of the input it stands for. Normalizers and
  # pre-tokenizers rewrite and split these lists; a token's offsets are the
  # start of its first character and the stop of its last, which is how
  # Hugging Face's NormalizedString maps a normalized range back to the input.
  # Characters a transformation inserts take the range of the character they
  # were derived from (HF's `transform` rules: a character that replaces
  # others takes the range of the first one it consumes, an inserted one that
  # of the last one consumed before it).

  alias Tokenizers.Unicode

  @type t :: [{non_neg_integer, non_neg_integer, non_neg_integer}]

  @doc "A text for `bin`, whose first byte is at `base` in the input."
  def new(bin, base \\ 0), do: new(bin, base, [])

  defp new(<<cp::utf8, rest::binary>>, pos, acc) do
    size = Unicode.utf8_size(cp)
    new(rest, pos + size, [{cp, pos, pos + size} | acc])
  end

  defp new(<<>>, _pos, acc), do: Enum.reverse(acc)

  def to_binary(text), do: for({cp, _, _} <- text, into: <<>>, do: <<cp::utf8>>)

  @doc "Each character to zero or more characters, all with its range."
  def expand(text, fun) do
    Enum.flat_map(text, fn {cp, s, e} = char ->
      case fun.(cp) do
        [^cp] -> [char]
        cps -> Enum.map(cps, &{&1, s, e})
      end
    end)
  end

  def map(text, fun), do: Enum.map(text, fn {cp, s, e} -> {fun.(cp), s, e} end)

  def filter(text, keep?), do: Enum.filter(text, fn {cp, _, _} -> keep?.(cp) end)

  @doc "Unicode normalization (:nfd, :nfc, :nfkd, :nfkc), cluster by cluster."
  def normalize(text, form) do
    cps = Enum.map(text, &elem(&1, 0))

    if unicode_form(cps, form) == cps do
      text
    else
      text |> clusters() |> Enum.flat_map(&normalize_cluster(&1, form))
    end
  end

  defp unicode_form(cps, :nfd), do: :unicode.characters_to_nfd_list(cps)
  defp unicode_form(cps, :nfc), do: :unicode.characters_to_nfc_list(cps)
  defp unicode_form(cps, :nfkd), do: :unicode.characters_to_nfkd_list(cps)
  defp unicode_form(cps, :nfkc), do: :unicode.characters_to_nfkc_list(cps)

  # Grapheme clusters of the text (normalization never crosses them).
  defp clusters(text), do: clusters(text, Enum.map(text, &elem(&1, 0)), [])

  defp clusters([], _cps, acc), do: Enum.reverse(acc)

  defp clusters(text, cps, acc) do
    case :unicode_util.gc(cps) do
      [gc | rest] ->
        n = if is_list(gc), do: length(gc), else: 1
        {cluster, text} = Enum.split(text, n)
        clusters(text, rest, [cluster | acc])

      [] ->
        Enum.reverse([text | acc])
    end
  end

  defp normalize_cluster(cluster, form) do
    cps = Enum.map(cluster, &elem(&1, 0))
    out = unicode_form(cps, form)

    if out == cps do
      cluster
    else
      decomposition = if form in [:nfkd, :nfkc], do: :nfkd, else: :nfd
      # each input character's decomposition: the first output replaces it
      # (change 0), the others are inserted after it (change 1)
      decomposed =
        Enum.flat_map(cps, fn cp ->
          [first | rest] = unicode_form([cp], decomposition)
          [{first, 0} | Enum.map(rest, &{&1, 1})]
        end)

      changes =
        if form in [:nfd, :nfkd] do
          if length(decomposed) == length(out),
            do: Enum.zip(out, Enum.map(decomposed, &elem(&1, 1))),
            else: Enum.with_index(out, fn cp, i -> {cp, if(i == 0, do: 0, else: 1)} end)
        else
          compose_changes(out, decomposed, [])
        end

      transform(cluster, changes)
    end
  end

  # A composed character that absorbed k decomposed ones carries their
  # changes minus the k - 1 characters it swallowed.
  defp compose_changes([], _decomposed, acc), do: Enum.reverse(acc)

  defp compose_changes([cp | out], decomposed, acc) do
    k = max(length(:unicode.characters_to_nfd_list([cp])), 1)
    {taken, decomposed} = Enum.split(decomposed, k)
    change = Enum.reduce(taken, 0, fn {_, c}, sum -> sum + c end) - (length(taken) - 1)
    compose_changes(out, decomposed, [{cp, change} | acc])
  end

  @doc """
  HF's NormalizedString::transform on a whole text: `changes` lists the new
  characters, each with 1 (inserted), 0 (replaces one) or -n (replaces n + 1).
  """
  def transform(text, changes), do: transform(text, changes, nil, [])

  defp transform(_text, [], _last, acc), do: Enum.reverse(acc)

  defp transform(text, [{cp, change} | changes], last, acc) when change > 0 do
    {s, e} =
      case {last, text} do
        {{_, s, e}, _} -> {s, e}
        {nil, [{_, s, _} | _]} -> {s, s}
        {nil, []} -> {0, 0}
      end

    transform(text, changes, last, [{cp, s, e} | acc])
  end

  defp transform([{_, s, e} = first | rest], [{cp, change} | changes], _last, acc) do
    {consumed, rest} = Enum.split(rest, -change)
    last = List.last(consumed) || first
    transform(rest, changes, last, [{cp, s, e} | acc])
  end

  defp transform([], [{cp, _} | changes], last, acc) do
    {s, e} = if last, do: {elem(last, 1), elem(last, 2)}, else: {0, 0}
    transform([], changes, last, [{cp, s, e} | acc])
  end

  @doc "Prepends `str`: its characters take the range of the first character."
  def prepend([], _str), do: []

  def prepend([{_, s, e} | _] = text, str) do
    Enum.map(String.to_charlist(str), &{&1, s, e}) ++ text
  end

  def strip(text, left?, right?) do
    text = if left?, do: Enum.drop_while(text, &Unicode.whitespace?(elem(&1, 0))), else: text

    if right?,
      do:
        text
        |> Enum.reverse()
        |> Enum.drop_while(&Unicode.whitespace?(elem(&1, 0)))
        |> Enum.reverse(),
      else: text
  end

  ## Matching: a text cut into segments `{text, match?}` that cover it.

  @doc "Segments of a regex (a compiled :re pattern) over the text."
  def find_regex([], _mp), do: [{[], false}]

  def find_regex(text, mp) do
    case :re.run(to_binary(text), mp, [:global, {:capture, :first, :index}]) do
      :nomatch -> [{text, false}]
      {:match, matches} -> cut(text, 0, Enum.map(matches, fn [{s, l}] -> {s, s + l} end), [])
    end
  end

  @doc "Segments where every character satisfying `pred` is a match of its own."
  def find_char([], _pred), do: [{[], false}]

  def find_char(text, pred) do
    {acc, run} =
      Enum.reduce(text, {[], []}, fn {cp, _, _} = char, {acc, run} ->
        if pred.(cp) do
          acc = if run == [], do: acc, else: [{Enum.reverse(run), false} | acc]
          {[{[char], true} | acc], []}
        else
          {acc, [char | run]}
        end
      end)

    acc = if run == [], do: acc, else: [{Enum.reverse(run), false} | acc]
    Enum.reverse(acc)
  end

  @doc "Segments of every occurrence of a literal string."
  def find_string(text, ""), do: [{text, false}]

  def find_string(text, str) do
    case :binary.matches(to_binary(text), str) do
      [] -> [{text, false}]
      matches -> cut(text, 0, Enum.map(matches, fn {s, l} -> {s, s + l} end), [])
    end
  end

  # Cuts the text at byte ranges (sorted, disjoint) into segments.
  defp cut(text, _pos, [], acc) do
    acc = if text == [], do: acc, else: [{text, false} | acc]
    Enum.reverse(acc)
  end

  defp cut(text, pos, [{s, e} | ranges], acc) do
    {before, text, pos} = take_bytes(text, pos, s, [])
    acc = if before == [], do: acc, else: [{before, false} | acc]
    {match, text, pos} = take_bytes(text, pos, e, [])
    cut(text, pos, ranges, [{match, true} | acc])
  end

  defp take_bytes(text, pos, stop, acc) when pos >= stop, do: {Enum.reverse(acc), text, pos}

  defp take_bytes([{cp, _, _} = char | rest], pos, stop, acc),
    do: take_bytes(rest, pos + Unicode.utf8_size(cp), stop, [char | acc])

  defp take_bytes([], pos, _stop, acc), do: {Enum.reverse(acc), [], pos}

  def invert(segments), do: Enum.map(segments, fn {t, m} -> {t, not m} end)

  @doc "HF's split delimiter behaviours; returns the non-empty pieces."
  def split(segments, behavior) do
    pieces =
      case behavior do
        :isolated ->
          Enum.map(segments, &elem(&1, 0))

        :removed ->
          for {t, false} <- segments, do: t

        :contiguous ->
          merge(segments, fn match?, prev -> match? == prev end)

        :merged_with_previous ->
          merge(segments, fn match?, prev -> match? and not prev end)

        :merged_with_next ->
          segments
          |> Enum.reverse()
          |> Enum.map(fn {t, m} -> {Enum.reverse(t), m} end)
          |> merge(fn match?, prev -> match? and not prev end)
          |> Enum.map(&Enum.reverse/1)
          |> Enum.reverse()
      end

    Enum.reject(pieces, &(&1 == []))
  end

  # Folds segments left to right; `join?.(match?, previous_match?)` says
  # whether a segment extends the previous piece.
  defp merge(segments, join?) do
    {acc, _} =
      Enum.reduce(segments, {[], false}, fn {t, m}, {acc, prev} ->
        acc =
          case acc do
            [last | rest] -> if join?.(m, prev), do: [last ++ t | rest], else: [t | acc]
            [] -> [t]
          end

        {acc, m}
      end)

    Enum.reverse(acc)
  end

  @doc """
  Replaces each match with `content`; its characters take the range of the
  last matched character (HF's replace).
  """
  def replace(segments, content) do
    cps = String.to_charlist(content)

    Enum.flat_map(segments, fn
      {t, false} ->
        t

      {[], true} ->
        []

      {t, true} ->
        {_, s, e} = List.last(t)
        Enum.map(cps, &{&1, s, e})
    end)
  end

  @doc """
  Offsets in the input of the normalized byte range `start...stop` of a text
  (given as a tuple of per-byte ranges, see `byte_ranges/1`).
  """
  def offsets(_ranges, start, stop) when stop <= start, do: {start, start}

  def offsets(ranges, start, stop) do
    {s, _} = elem(ranges, start)
    {_, e} = elem(ranges, stop - 1)
    {s, e}
  end

  @doc "Per normalized byte, the input range of its character."
  def byte_ranges(text), do: text |> byte_ranges([]) |> Enum.reverse() |> List.to_tuple()

  defp byte_ranges([], acc), do: acc
  defp byte_ranges([{cp, s, e} | rest], acc) when cp < 0x80, do: byte_ranges(rest, [{s, e} | acc])

  defp byte_ranges([{cp, s, e} | rest], acc) do
    range = {s, e}

    acc =
      case Unicode.utf8_size(cp) do
        2 -> [range, range | acc]
        3 -> [range, range, range | acc]
        4 -> [range, range, range, range | acc]
      end

    byte_ranges(rest, acc)
  end
end
