defmodule Tokenizers.PreTokenizer do
  @moduledoc false
  # The `pre_tokenizer` of tokenizer.json: splits a normalized text into
  # words (some also rewrite them: ByteLevel, Metaspace).

  alias Tokenizers.{Pattern, Text, Unicode}

  @gpt2_pattern "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

  def from_json(nil), do: nil

  def from_json(%{"type" => type} = json) do
    case type do
      "BertPreTokenizer" ->
        :bert

      "Whitespace" ->
        {:whitespace, whitespace_regex()}

      "WhitespaceSplit" ->
        :whitespace_split

      "ByteLevel" ->
        {:byte_level, json["add_prefix_space"] != false,
         if(json["use_regex"] != false, do: Pattern.compile!(@gpt2_pattern))}

      "Split" ->
        {:split, Pattern.from_json(json["pattern"]), behavior(json["behavior"]),
         json["invert"] == true}

      "Metaspace" ->
        {:metaspace, replacement(json), prepend_scheme(json), json["split"] != false}

      "Digits" ->
        {:digits, json["individual_digits"] == true}

      "Punctuation" ->
        {:punctuation, behavior(json["behavior"] || "Isolated")}

      "Sequence" ->
        {:sequence, Enum.map(json["pretokenizers"], &from_json/1)}

      other ->
        throw({:unsupported, "pre-tokenizer #{other}"})
    end
  end

  @doc false
  def replacement(json) do
    case json["replacement"] || "▁" do
      <<cp::utf8>> -> cp
      other -> throw({:unsupported, "Metaspace replacement #{inspect(other)}"})
    end
  end

  @doc false
  def prepend_scheme(json) do
    case json["prepend_scheme"] do
      "first" -> :first
      "never" -> :never
      "always" -> :always
      # files from before prepend_scheme existed
      nil -> if json["add_prefix_space"] == false, do: :never, else: :always
    end
  end

  defp behavior("Removed"), do: :removed
  defp behavior("Isolated"), do: :isolated
  defp behavior("MergedWithPrevious"), do: :merged_with_previous
  defp behavior("MergedWithNext"), do: :merged_with_next
  defp behavior("Contiguous"), do: :contiguous

  # Rust regex's \w (Alphabetic, marks, decimal digits, connector
  # punctuation, joiners) and \s (White_Space), spelled out for PCRE.
  defp whitespace_regex do
    w = "\\p{L}\\p{M}\\p{Nd}\\p{Nl}\\p{Pc}\\x{200C}\\x{200D}\\x{24B6}-\\x{24E9}"
    Pattern.compile!("[#{w}]+|[^#{w}#{Unicode.white_space_class()}]+")
  end

  @doc "Splits each text of a list into words."
  def pre_tokenize(nil, texts), do: texts

  def pre_tokenize({:sequence, pre_tokenizers}, texts),
    do: Enum.reduce(pre_tokenizers, texts, &pre_tokenize/2)

  def pre_tokenize(pt, texts), do: Enum.flat_map(texts, &split(pt, &1))

  defp split(:bert, text) do
    text
    |> Text.find_char(&Unicode.whitespace?/1)
    |> Text.split(:removed)
    |> Enum.flat_map(
      &(&1
        |> Text.find_char(fn cp -> Unicode.bert_punctuation?(cp) end)
        |> Text.split(:isolated))
    )
  end

  defp split({:whitespace, mp}, text),
    do: text |> Text.find_regex(mp) |> Text.invert() |> Text.split(:removed)

  defp split(:whitespace_split, text),
    do: text |> Text.find_char(&Unicode.whitespace?/1) |> Text.split(:removed)

  defp split({:split, pattern, behavior, invert}, text) do
    segments = Pattern.find(text, pattern)
    segments = if invert, do: Text.invert(segments), else: segments
    Text.split(segments, behavior)
  end

  defp split({:digits, individual}, text) do
    segments = Text.find_char(text, &Unicode.numeric?/1)
    Text.split(segments, if(individual, do: :isolated, else: :contiguous))
  end

  defp split({:punctuation, behavior}, text),
    do: text |> Text.find_char(&Unicode.bert_punctuation?/1) |> Text.split(behavior)

  defp split({:metaspace, replacement, scheme, split?}, text) do
    text = Enum.map(text, fn {cp, s, e} -> {if(cp == ?\s, do: replacement, else: cp), s, e} end)

    text =
      case {scheme, text} do
        {_, [{^replacement, _, _} | _]} -> text
        {:always, _} -> Text.prepend(text, <<replacement::utf8>>)
        {:first, [{_, 0, _} | _]} -> Text.prepend(text, <<replacement::utf8>>)
        _ -> text
      end

    if split?,
      do: text |> Text.find_char(&(&1 == replacement)) |> Text.split(:merged_with_next),
      else: [text]
  end

  defp split({:byte_level, add_prefix_space, mp}, text) do
    text =
      case text do
        [{?\s, _, _} | _] -> text
        _ when add_prefix_space -> Text.prepend(text, " ")
        _ -> text
      end

    words = if mp, do: text |> Text.find_regex(mp) |> Text.split(:isolated), else: [text]
    Enum.map(words, &to_byte_level/1)
  end

  @doc "Each character to the byte-level characters of its UTF-8 bytes."
  def to_byte_level(text) do
    Enum.flat_map(text, fn {cp, s, e} ->
      if cp < 128 do
        [{Unicode.byte_char(cp), s, e}]
      else
        for <<(b <- <<cp::utf8>>)>>, do: {Unicode.byte_char(b), s, e}
      end
    end)
  end
end
