defmodule Tokenizers.Golden do
  @moduledoc false
  # Reads the goldens written by scripts/tokenizers_golden.py and compares
  # this library's answers with them.

  alias Tokenizers.{Encoding, Tokenizer}

  @dir Path.expand("golden", __DIR__)

  def dir, do: @dir

  def read_gz(name),
    do: @dir |> Path.join(name) |> File.read!() |> :zlib.gunzip() |> JSON.decode!()

  def corpus, do: read_gz("corpus.json.gz")

  def tokenizer(family) do
    json =
      case family do
        "minilm" -> File.read!(Path.join([@dir, "minilm", "tokenizer.json"]))
        _ -> @dir |> Path.join("#{family}.tokenizer.json.gz") |> File.read!() |> :zlib.gunzip()
      end

    {:ok, t} = Tokenizer.from_buffer(json)
    t |> Tokenizer.disable_padding() |> Tokenizer.disable_truncation()
  end

  @doc "A golden record expanded to plain lists (`previous` supplies an omitted decode)."
  def expand(rec, previous_decode \\ nil) do
    n = length(rec["ids"])

    {offsets, _} =
      Enum.map_reduce(rec["offsets"], 0, fn d, prev -> {prev + d, prev + d} end)

    %{
      ids: rec["ids"],
      type_ids: digits(rec["type_ids"], n, 0),
      attention_mask: digits(rec["attention_mask"], n, 1),
      special_tokens_mask: digits(rec["special_tokens_mask"], n, 0),
      offsets: offsets |> Enum.chunk_every(2) |> Enum.map(fn [s, e] -> {s, e} end),
      decode: Map.get(rec, "decode", previous_decode)
    }
  end

  defp digits(nil, n, default), do: List.duplicate(default, n)
  defp digits(str, _n, _default), do: str |> String.to_charlist() |> Enum.map(&(&1 - ?0))

  def actual(t, enc) do
    {:ok, decoded} = Tokenizer.decode(t, enc.ids)

    %{
      ids: enc.ids,
      type_ids: enc.type_ids,
      attention_mask: enc.attention_mask,
      special_tokens_mask: enc.special_tokens_mask,
      offsets: Encoding.get_offsets(enc),
      decode: decoded
    }
  end

  @fields [:ids, :type_ids, :attention_mask, :special_tokens_mask, :offsets, :decode]

  @doc "The fields where `actual` differs from `expected`."
  def diff(expected, actual),
    do: Enum.reject(@fields, &(Map.fetch!(expected, &1) == Map.fetch!(actual, &1)))

  @doc """
  Compares a family with its goldens. Returns `%{kind => {agree, total}}` and
  the first few differences.
  """
  def compare(family) do
    t = tokenizer(family)
    golden = read_gz("#{family}.golden.json.gz")
    %{"strings" => strings, "pairs" => pairs} = corpus()
    pairs = Enum.map(pairs, fn [a, b] -> {a, b} end)

    cases =
      Enum.zip(strings, golden["cases"])
      |> Enum.flat_map(fn {s, [plain, special]} ->
        plain = expand(plain)
        special = expand(special, plain.decode)
        [{:plain, s, false, plain}, {:special, s, true, special}]
      end)

    pair_cases =
      Enum.zip(pairs, golden["pairs"])
      |> Enum.map(fn {p, rec} -> {:pairs, p, true, expand(rec)} end)

    results = Enum.map(cases ++ pair_cases, &check(t, &1))

    trunc_results =
      Enum.map(golden["truncation"], fn rec ->
        input =
          if rec["pair"], do: Enum.at(pairs, rec["pair"]), else: Enum.at(strings, rec["input"])

        tt =
          Tokenizer.set_truncation(t,
            max_length: rec["max_length"],
            direction: String.to_atom(rec["direction"])
          )

        check(tt, {:truncation, input, true, expand(rec)})
      end)

    pad_results =
      Enum.map(golden["padding"], fn rec ->
        input = Enum.at(strings, rec["input"])
        {:ok, enc} = Tokenizer.encode(t, input)

        enc =
          Encoding.pad(enc, rec["length"],
            pad_id: 0,
            pad_token: "[PAD]",
            direction: String.to_atom(rec["direction"])
          )

        expected = expand(rec)

        {:padding, input, Tokenizers.Golden.diff(expected, actual(t, enc)), expected,
         actual(t, enc)}
      end)

    all = results ++ trunc_results ++ pad_results

    summary =
      all
      |> Enum.group_by(&elem(&1, 0))
      |> Map.new(fn {kind, rs} -> {kind, {Enum.count(rs, &(elem(&1, 2) == [])), length(rs)}} end)

    failures = for {kind, input, [_ | _] = fields, e, a} <- all, do: {kind, input, fields, e, a}
    {summary, failures}
  end

  defp check(t, {kind, input, add, expected}) do
    {:ok, enc} = Tokenizer.encode(t, input, add_special_tokens: add)
    actual = actual(t, enc)
    {kind, input, diff(expected, actual), expected, actual}
  end
end
