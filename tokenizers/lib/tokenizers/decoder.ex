defmodule Tokenizers.Decoder do
  @moduledoc false
  # The `decoder` of tokenizer.json: token strings back to text. Each
  # decoder maps a list of token strings to a new list (HF's decode_chain);
  # the result is their concatenation.

  alias Tokenizers.{Pattern, PreTokenizer, Unicode}

  def from_json(nil), do: nil

  def from_json(%{"type" => type} = json) do
    case type do
      "WordPiece" ->
        {:word_piece, json["prefix"] || "##", json["cleanup"] != false}

      "ByteLevel" ->
        :byte_level

      "Metaspace" ->
        {:metaspace, PreTokenizer.replacement(json), PreTokenizer.prepend_scheme(json)}

      "BPEDecoder" ->
        {:bpe, json["suffix"] || "</w>"}

      "ByteFallback" ->
        :byte_fallback

      "Fuse" ->
        :fuse

      "Strip" ->
        {:strip, json["content"], json["start"] || 0, json["stop"] || 0}

      "Replace" ->
        {:replace, Pattern.from_json(json["pattern"]), json["content"]}

      "Sequence" ->
        {:sequence, Enum.map(json["decoders"], &from_json/1)}

      other ->
        throw({:unsupported, "decoder #{other}"})
    end
  end

  def decode(decoder, tokens), do: decoder |> chain(tokens) |> IO.iodata_to_binary()

  defp chain(nil, tokens), do: Enum.intersperse(tokens, " ")
  defp chain({:sequence, decoders}, tokens), do: Enum.reduce(decoders, tokens, &chain/2)

  defp chain({:word_piece, prefix, cleanup}, tokens) do
    tokens
    |> Enum.with_index()
    |> Enum.map(fn {token, i} ->
      token =
        cond do
          i == 0 -> token
          String.starts_with?(token, prefix) -> String.replace_prefix(token, prefix, "")
          true -> " " <> token
        end

      if cleanup, do: cleanup(token), else: token
    end)
  end

  defp chain(:byte_level, tokens) do
    bytes =
      Enum.map(tokens, fn token ->
        cps = String.to_charlist(token)
        bytes = Enum.map(cps, &Unicode.char_byte/1)
        if Enum.all?(bytes, &is_integer/1), do: bytes, else: token
      end)

    [bytes |> IO.iodata_to_binary() |> Unicode.lossy()]
  end

  defp chain({:metaspace, replacement, scheme}, tokens) do
    tokens
    |> Enum.with_index()
    |> Enum.map(fn {token, i} ->
      for <<cp::utf8 <- token>>, into: <<>> do
        cond do
          cp != replacement -> <<cp::utf8>>
          i == 0 and scheme != :never -> ""
          true -> " "
        end
      end
    end)
  end

  defp chain({:bpe, suffix}, tokens) do
    n = length(tokens) - 1

    tokens
    |> Enum.with_index()
    |> Enum.map(fn {token, i} -> String.replace(token, suffix, if(i == n, do: "", else: " ")) end)
  end

  defp chain(:byte_fallback, tokens) do
    {acc, pending} =
      Enum.reduce(tokens, {[], []}, fn token, {acc, pending} ->
        case byte_token(token) do
          nil -> {[token | flush_bytes(pending, acc)], []}
          byte -> {acc, [byte | pending]}
        end
      end)

    Enum.reverse(flush_bytes(pending, acc))
  end

  defp chain(:fuse, tokens), do: [IO.iodata_to_binary(tokens)]

  defp chain({:strip, content, start, stop}, tokens) do
    <<c::utf8>> = content

    Enum.map(tokens, fn token ->
      cps = String.to_charlist(token)
      left = cps |> Enum.take(start) |> Enum.take_while(&(&1 == c)) |> length()
      rest = Enum.drop(cps, left)
      right = rest |> Enum.reverse() |> Enum.take(stop) |> Enum.take_while(&(&1 == c)) |> length()
      List.to_string(Enum.drop(rest, -right))
    end)
  end

  defp chain({:replace, pattern, content}, tokens),
    do: Enum.map(tokens, &Pattern.replace_in(&1, pattern, content))

  defp byte_token(<<"<0x", hex::binary-size(2), ">">>) do
    case Integer.parse(hex, 16) do
      {byte, ""} -> byte
      _ -> nil
    end
  end

  defp byte_token(_), do: nil

  defp flush_bytes([], acc), do: acc

  defp flush_bytes(pending, acc) do
    bytes = pending |> Enum.reverse() |> :erlang.list_to_binary()

    if String.valid?(bytes),
      do: [bytes | acc],
      else: List.duplicate("\uFFFD", byte_size(bytes)) ++ acc
  end

  @cleanups [
    {" .", "."},
    {" ?", "?"},
    {" !", "!"},
    {" ,", ","},
    {" ' ", "'"},
    {" n't", "n't"},
    {" 'm", "'m"},
    {" do not", " don't"},
    {" 's", "'s"},
    {" 've", "'ve"},
    {" 're", "'re"}
  ]

  @cleanup_froms Enum.map(@cleanups, &elem(&1, 0))

  # one search for all patterns first: most tokens need no cleanup
  defp cleanup(token) do
    if :binary.match(token, @cleanup_froms) == :nomatch,
      do: token,
      else: Enum.reduce(@cleanups, token, fn {from, to}, t -> String.replace(t, from, to) end)
  end
end
