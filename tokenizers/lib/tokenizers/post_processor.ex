defmodule Tokenizers.PostProcessor do
  @moduledoc """
  Post-processors add the special tokens around encoded sequences
  (`post_processor` of tokenizer.json, or `template/1`).
  """

  alias Tokenizers.{Encoding, Unicode}

  @doc """
  A template post-processor, as HF's TemplateProcessing: `single: "[CLS] $A [SEP]"`,
  `pair: "[CLS] $A [SEP] $B:1 [SEP]:1"`, `special_tokens: [{"[CLS]", 101}, ...]`.
  """
  def template(opts) do
    special =
      Map.new(Keyword.get(opts, :special_tokens, []), fn {token, id} ->
        {token, {[id], [token]}}
      end)

    {:template, parse_template(opts[:single] || "$A"), parse_template(opts[:pair] || "$A $B:1"),
     special}
  end

  defp parse_template(pieces) when is_list(pieces), do: Enum.map(pieces, &parse_piece/1)
  defp parse_template(str), do: str |> String.split() |> Enum.map(&parse_piece/1)

  defp parse_piece("$" <> rest) do
    {name, type_id} =
      case String.split(rest, ":", parts: 2) do
        [name, type] -> {name, String.to_integer(type)}
        [name] -> {name, nil}
      end

    case {name, type_id} do
      {seq, type} when seq in ["", "A", "a"] -> {:sequence, :a, type || 0}
      {seq, type} when seq in ["B", "b"] -> {:sequence, :b, type || 0}
      {n, nil} -> {:sequence, :a, String.to_integer(n)}
    end
  end

  defp parse_piece(str) do
    case String.split(str, ":", parts: 2) do
      [token, type] -> {:special, token, String.to_integer(type)}
      [token] -> {:special, token, 0}
    end
  end

  @doc false
  def from_json(nil), do: nil

  def from_json(%{"type" => type} = json) do
    case type do
      "BertProcessing" ->
        {:bert, token_pair(json["sep"]), token_pair(json["cls"])}

      "RobertaProcessing" ->
        {:roberta, token_pair(json["sep"]), token_pair(json["cls"]),
         json["trim_offsets"] != false, json["add_prefix_space"] != false}

      "ByteLevel" ->
        {:byte_level, json["trim_offsets"] != false, json["add_prefix_space"] != false}

      "TemplateProcessing" ->
        special =
          Map.new(json["special_tokens"] || %{}, fn {name, t} ->
            {name, {t["ids"], t["tokens"]}}
          end)

        {:template, Enum.map(json["single"], &json_piece/1),
         Enum.map(json["pair"], &json_piece/1), special}

      "Sequence" ->
        {:sequence, Enum.map(json["processors"], &from_json/1)}

      other ->
        throw({:unsupported, "post-processor #{other}"})
    end
  end

  defp token_pair([token, id]), do: {token, id}

  defp json_piece(%{"SpecialToken" => %{"id" => id, "type_id" => t}}), do: {:special, id, t}

  defp json_piece(%{"Sequence" => %{"id" => id, "type_id" => t}}),
    do: {:sequence, if(id == "B", do: :b, else: :a), t}

  @doc false
  def added_tokens(nil, _pair?), do: 0
  def added_tokens({:bert, _, _}, pair?), do: if(pair?, do: 3, else: 2)
  def added_tokens({:roberta, _, _, _, _}, pair?), do: if(pair?, do: 4, else: 2)
  def added_tokens({:byte_level, _, _}, _), do: 0

  def added_tokens({:template, single, pair, special}, pair?) do
    for {:special, id, _} <- if(pair?, do: pair, else: single), reduce: 0 do
      n -> n + length(elem(Map.get(special, id, {[], []}), 0))
    end
  end

  def added_tokens({:sequence, pps}, pair?),
    do: Enum.reduce(pps, 0, &(added_tokens(&1, pair?) + &2))

  @doc false
  def process(pp, encodings, add_special_tokens) do
    pp |> process_encodings(encodings, add_special_tokens) |> Encoding.merge()
  end

  defp process_encodings(nil, encodings, _add), do: encodings

  defp process_encodings({:sequence, pps}, encodings, add),
    do: Enum.reduce(pps, encodings, &process_encodings(&1, &2, add))

  defp process_encodings({:byte_level, trim, prefix}, encodings, _add) do
    if trim, do: Enum.map(encodings, &trim_offsets(&1, prefix)), else: encodings
  end

  defp process_encodings({:bert, _, _}, encodings, false), do: encodings

  defp process_encodings({:bert, {sep, sep_id}, {cls, cls_id}}, [a | rest], true) do
    first = [Encoding.special([cls_id], [cls], 0), a, Encoding.special([sep_id], [sep], 0)]

    case rest do
      [] -> first
      [b] -> first ++ [b, Encoding.special([sep_id], [sep], 1)]
    end
  end

  defp process_encodings({:roberta, {sep, sep_id}, {cls, cls_id}, trim, prefix}, encs, add) do
    encs = if trim, do: Enum.map(encs, &trim_offsets(&1, prefix)), else: encs
    # RoBERTa has no segment embeddings: every type id is 0
    encs = Enum.map(encs, &%{&1 | type_ids: List.duplicate(0, Encoding.n_tokens(&1))})

    if add do
      [a | rest] = encs
      first = [Encoding.special([cls_id], [cls], 0), a, Encoding.special([sep_id], [sep], 0)]

      case rest do
        [] ->
          first

        [b] ->
          first ++ [Encoding.special([sep_id], [sep], 0), b, Encoding.special([sep_id], [sep], 0)]
      end
    else
      encs
    end
  end

  defp process_encodings({:template, single, pair, special}, encodings, add) do
    template = if length(encodings) == 2, do: pair, else: single

    Enum.flat_map(template, fn
      {:sequence, which, type_id} ->
        enc = Enum.at(encodings, if(which == :b, do: 1, else: 0))
        [%{enc | type_ids: List.duplicate(type_id, Encoding.n_tokens(enc))}]

      {:special, id, type_id} ->
        if add do
          {ids, tokens} = Map.fetch!(special, id)
          [Encoding.special(ids, tokens, type_id)]
        else
          []
        end
    end)
  end

  # ByteLevel's offset trimming: a token's leading and trailing spaces
  # (the byte-level space, or real whitespace) leave its offsets.
  defp trim_offsets(enc, add_prefix_space) do
    offsets =
      Enum.zip(enc.tokens, enc.offsets)
      |> Enum.with_index()
      |> Enum.map(fn {{token, {s, e}}, i} ->
        cps = String.to_charlist(token)
        leading = cps |> Enum.take_while(&space?/1) |> length()
        trailing = cps |> Enum.reverse() |> Enum.take_while(&space?/1) |> length()

        leading =
          if (i == 0 or s == 0) and add_prefix_space and leading == 1, do: 0, else: leading

        s = if leading > 0, do: min(s + leading, e), else: s
        e = if trailing > 0 and e >= trailing, do: max(e - trailing, s), else: e
        {s, e}
      end)

    %{enc | offsets: offsets}
  end

  @space_char Unicode.byte_char(?\s)
  defp space?(cp), do: cp == @space_char or Unicode.whitespace?(cp)
end
