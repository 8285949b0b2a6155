defmodule Tokenizers.Normalizer do
  @moduledoc false
  # The `normalizer` of tokenizer.json, applied to a `Tokenizers.Text`.

  alias Tokenizers.{Pattern, Text, Unicode}

  @doc "Builds a normalizer from its JSON description (nil for none)."
  def from_json(nil), do: nil

  def from_json(%{"type" => type} = json) do
    case type do
      "BertNormalizer" ->
        {:bert, json["clean_text"] != false, json["handle_chinese_chars"] != false,
         json["strip_accents"], json["lowercase"] != false}

      "Lowercase" ->
        :lowercase

      "NFC" ->
        {:unicode, :nfc}

      "NFD" ->
        {:unicode, :nfd}

      "NFKC" ->
        {:unicode, :nfkc}

      "NFKD" ->
        {:unicode, :nfkd}

      "Strip" ->
        {:strip, json["strip_left"] != false, json["strip_right"] != false}

      "StripAccents" ->
        :strip_accents

      "Replace" ->
        {:replace, Pattern.from_json(json["pattern"]), json["content"]}

      "Prepend" ->
        {:prepend, json["prepend"]}

      "Sequence" ->
        {:sequence, Enum.map(json["normalizers"], &from_json/1)}

      other ->
        throw({:unsupported, "normalizer #{other}"})
    end
  end

  @doc "Normalizes a text."
  def normalize(nil, text), do: text

  def normalize({:sequence, normalizers}, text),
    do: Enum.reduce(normalizers, text, &normalize/2)

  def normalize({:bert, clean_text, chinese, strip_accents, lowercase}, text) do
    text = if clean_text, do: bert_clean(text), else: text

    text =
      if chinese,
        do:
          Text.expand(text, fn cp -> if Unicode.chinese?(cp), do: [?\s, cp, ?\s], else: [cp] end),
        else: text

    text =
      if if(is_nil(strip_accents), do: lowercase, else: strip_accents),
        do: text |> Text.normalize(:nfd) |> Text.filter(&(not Unicode.nonspacing_mark?(&1))),
        else: text

    if lowercase, do: lowercase(text), else: text
  end

  def normalize(:lowercase, text), do: lowercase(text)
  def normalize({:unicode, form}, text), do: Text.normalize(text, form)
  def normalize({:strip, left, right}, text), do: Text.strip(text, left, right)

  def normalize(:strip_accents, text),
    do: Text.filter(text, &(not Unicode.mark?(&1)))

  def normalize({:replace, pattern, content}, text),
    do: text |> Pattern.find(pattern) |> Text.replace(content)

  def normalize({:prepend, str}, text), do: Text.prepend(text, str)

  defp lowercase(text), do: Text.expand(text, &Unicode.downcase/1)

  # Drops NUL, U+FFFD and control characters; other whitespace becomes a space.
  defp bert_clean(text) do
    Enum.flat_map(text, fn {cp, s, e} = char ->
      cond do
        cp in [?\t, ?\n, ?\r] -> [{?\s, s, e}]
        cp == 0 or cp == 0xFFFD or Unicode.other?(cp) -> []
        Unicode.whitespace?(cp) -> [{?\s, s, e}]
        true -> [char]
      end
    end)
  end
end
