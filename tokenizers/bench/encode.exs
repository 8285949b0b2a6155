# Encode throughput on the golden corpus (2,000 strings), per family.
# Run from tokenizers/: mix run bench/encode.exs [family ...]
Code.require_file("../test/support_golden.exs", __DIR__)

alias Tokenizers.{Golden, Tokenizer}

families =
  case System.argv() do
    [] -> ~w(minilm bert gpt2 llama3 sp_bpe llama2 unigram clip_like split_behaviours)
    names -> names
  end

%{"strings" => strings} = Golden.corpus()
bytes = strings |> Enum.map(&byte_size/1) |> Enum.sum()

IO.puts(String.pad_trailing("family", 18) <> "  strings/s    MB/s   decode strings/s")

for family <- families do
  t = Golden.tokenizer(family)
  # warm-up (compiles regexes into persistent_term, loads code)
  {:ok, _} = Tokenizer.encode_batch(t, Enum.take(strings, 50))
  {us, {:ok, encodings}} = :timer.tc(fn -> Tokenizer.encode_batch(t, strings) end)
  ids = Enum.map(encodings, & &1.ids)
  {dus, {:ok, _}} = :timer.tc(fn -> Tokenizer.decode_batch(t, ids) end)
  rate = length(strings) / (us / 1.0e6)
  mbs = bytes / us
  drate = length(strings) / (dus / 1.0e6)

  IO.puts(
    String.pad_trailing(family, 18) <>
      String.pad_leading(:erlang.float_to_binary(rate, decimals: 0), 11) <>
      String.pad_leading(:erlang.float_to_binary(mbs, decimals: 2), 8) <>
      String.pad_leading(:erlang.float_to_binary(drate, decimals: 0), 19)
  )
end
