defmodule Tokenizers.Unicode do
  @moduledoc false
  # Character classes as Rust's `char` methods and the `tokenizers` crate
  # define them. Erlang exposes no general-category lookup, so the non-ASCII
  # cases ask PCRE (`:re` with `ucp`), whose Unicode tables are OTP's.

  # Rust's char::is_whitespace: the White_Space property.
  @white_space [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680] ++
                 Enum.to_list(0x2000..0x200A) ++ [0x2028, 0x2029, 0x202F, 0x205F, 0x3000]

  @doc "The White_Space class written for a PCRE character class."
  def white_space_class do
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
  end

  for cp <- @white_space do
    def whitespace?(unquote(cp)), do: true
  end

  def whitespace?(_), do: false

  defp re(name) do
    case :persistent_term.get({__MODULE__, name}, nil) do
      nil ->
        source =
          case name do
            :other -> "^[\\p{Cc}\\p{Cf}\\p{Co}\\p{Cs}]$"
            :punct -> "^\\p{P}$"
            :mn -> "^\\p{Mn}$"
            :mark -> "^\\p{M}$"
            :alnum -> "^[\\p{L}\\p{N}]$"
            :numeric -> "^\\p{N}$"
          end

        {:ok, mp} = :re.compile(source, [:unicode, :ucp])
        :persistent_term.put({__MODULE__, name}, mp)
        mp

      mp ->
        mp
    end
  end

  defp class?(name, cp), do: :re.run(<<cp::utf8>>, re(name), [{:capture, :none}]) == :match

  # General category C less Cn: OTP's PCRE tables predate many assigned
  # characters (emoji among them) and would call them unassigned.
  @doc "General category Cc, Cf, Co or Cs."
  def other?(cp) when cp < 0x20 or cp == 0x7F, do: true
  def other?(cp) when cp < 0x7F, do: false
  def other?(cp), do: class?(:other, cp)

  @doc "BERT's punctuation: ASCII punctuation or general category P."
  def bert_punctuation?(cp) when cp in 33..47 or cp in 58..64 or cp in 91..96 or cp in 123..126,
    do: true

  def bert_punctuation?(cp) when cp < 128, do: false
  def bert_punctuation?(cp), do: class?(:punct, cp)

  @doc "Rust's char::is_numeric (general category N)."
  def numeric?(cp) when cp in ?0..?9, do: true
  def numeric?(cp) when cp < 128, do: false
  def numeric?(cp), do: class?(:numeric, cp)

  @doc "Nonspacing mark (Mn)."
  def nonspacing_mark?(cp) when cp < 0x300, do: false
  def nonspacing_mark?(cp), do: class?(:mn, cp)

  @doc "Any mark (Mn, Mc, Me)."
  def mark?(cp) when cp < 0x300, do: false
  def mark?(cp), do: class?(:mark, cp)

  @doc "Rust's char::is_alphanumeric (letters and numbers)."
  def alphanumeric?(cp) when cp in ?a..?z or cp in ?A..?Z or cp in ?0..?9, do: true
  def alphanumeric?(cp) when cp < 128, do: false
  def alphanumeric?(cp), do: class?(:alnum, cp)

  @doc "The CJK blocks that BERT surrounds with spaces."
  def chinese?(cp) do
    cp in 0x4E00..0x9FFF or cp in 0x3400..0x4DBF or cp in 0x20000..0x2A6DF or
      cp in 0x2A700..0x2B73F or cp in 0x2B740..0x2B81F or cp in 0x2B920..0x2CEAF or
      cp in 0xF900..0xFAFF or cp in 0x2F800..0x2FA1F
  end

  @doc "Rust's char::to_lowercase, one code point to one or more."
  def downcase(cp) when cp in ?A..?Z, do: [cp + 32]
  def downcase(cp) when cp < 128, do: [cp]
  def downcase(cp), do: String.to_charlist(String.downcase(<<cp::utf8>>))

  @doc "Size of a code point in UTF-8."
  def utf8_size(cp) when cp < 0x80, do: 1
  def utf8_size(cp) when cp < 0x800, do: 2
  def utf8_size(cp) when cp < 0x10000, do: 3
  def utf8_size(_), do: 4

  # GPT-2's reversible map from bytes to printable code points.
  printable = Enum.to_list(?!..?~) ++ Enum.to_list(0xA1..0xAC) ++ Enum.to_list(0xAE..0xFF)

  {byte_to_char, _} =
    Enum.reduce(0..255, {%{}, 0}, fn b, {map, n} ->
      if b in printable, do: {Map.put(map, b, b), n}, else: {Map.put(map, b, 256 + n), n + 1}
    end)

  @byte_to_char byte_to_char |> Enum.sort() |> Enum.map(&elem(&1, 1)) |> List.to_tuple()
  @char_to_byte Map.new(byte_to_char, fn {b, c} -> {c, b} end)

  @doc "The byte-level alphabet's code point for a byte."
  def byte_char(byte), do: elem(@byte_to_char, byte)

  @doc "The byte a byte-level code point stands for, or nil."
  def char_byte(cp), do: Map.get(@char_to_byte, cp)

  @doc """
  Replaces each maximal invalid UTF-8 subsequence with U+FFFD, as Rust's
  `String::from_utf8_lossy` does.
  """
  def lossy(bin), do: lossy(bin, [])

  defp lossy(<<cp::utf8, rest::binary>>, acc), do: lossy(rest, [<<cp::utf8>> | acc])
  defp lossy(<<>>, acc), do: acc |> Enum.reverse() |> IO.iodata_to_binary()

  defp lossy(<<b, rest::binary>>, acc) do
    skip = invalid_prefix_tail(b, rest)
    <<_::binary-size(skip), rest::binary>> = rest
    lossy(rest, ["\uFFFD" | acc])
  end

  # How many continuation bytes after lead byte `b` belong to the maximal
  # invalid subpart (bytes that could still have started a valid sequence).
  defp invalid_prefix_tail(b, rest) do
    {need, lo, hi} =
      cond do
        b in 0xC2..0xDF -> {1, 0x80, 0xBF}
        b == 0xE0 -> {2, 0xA0, 0xBF}
        b in 0xE1..0xEC or b in 0xEE..0xEF -> {2, 0x80, 0xBF}
        b == 0xED -> {2, 0x80, 0x9F}
        b == 0xF0 -> {3, 0x90, 0xBF}
        b in 0xF1..0xF3 -> {3, 0x80, 0xBF}
        b == 0xF4 -> {3, 0x80, 0x8F}
        true -> {0, 0, 0}
      end

    count_tail(rest, need, lo, hi, 0)
  end

  defp count_tail(_rest, 0, _lo, _hi, n), do: n

  defp count_tail(<<c, rest::binary>>, need, lo, hi, n) when c >= lo and c <= hi,
    do: count_tail(rest, need - 1, 0x80, 0xBF, n + 1)

  defp count_tail(_, _, _, _, n), do: n
end
