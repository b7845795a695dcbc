"""Countries and the words that name them in English text ("France", "French"), for the same-country questions
of `drkit.reader.compare`. A general list written from common knowledge, not from any benchmark: each line
is a country, then its other names and its demonyms. Historical states that text still names (the Soviet
Union, Yugoslavia, Czechoslovakia, East Germany) are their own countries, as Wikipedia treats them; England,
Scotland, Wales and Northern Ireland are the United Kingdom. Names that are often something else ("Georgia",
a US state too) are left out.
"""

from __future__ import annotations

import re

_TABLE = """
Afghanistan | Afghan
Albania | Albanian
Algeria | Algerian
Argentina | Argentine | Argentinian | Argentinean
Armenia | Armenian
Australia | Australian
Austria | Austrian
Azerbaijan | Azerbaijani
Bangladesh | Bangladeshi
Belarus | Belarusian | Byelorussian
Belgium | Belgian
Bolivia | Bolivian
Bosnia and Herzegovina | Bosnian | Bosnia
Brazil | Brazilian
Bulgaria | Bulgarian
Cambodia | Cambodian
Cameroon | Cameroonian
Canada | Canadian
Chile | Chilean
China | Chinese | People's Republic of China
Colombia | Colombian
Costa Rica | Costa Rican
Croatia | Croatian
Cuba | Cuban
Cyprus | Cypriot
Czech Republic | Czech | Czechia
Czechoslovakia | Czechoslovak | Czechoslovakian
Denmark | Danish
Dominican Republic | Dominican
East Germany | East German | German Democratic Republic
Ecuador | Ecuadorian
Egypt | Egyptian
England | English
Estonia | Estonian
Ethiopia | Ethiopian
Finland | Finnish
France | French
Germany | German | West Germany | West German | Federal Republic of Germany
Ghana | Ghanaian
Greece | Greek
Guatemala | Guatemalan
Haiti | Haitian
Honduras | Honduran
Hong Kong | Hongkonger
Hungary | Hungarian
Iceland | Icelandic
India | Indian
Indonesia | Indonesian
Iran | Iranian | Persia | Persian
Iraq | Iraqi
Ireland | Irish | Republic of Ireland
Israel | Israeli
Italy | Italian
Jamaica | Jamaican
Japan | Japanese
Jordan | Jordanian
Kazakhstan | Kazakh | Kazakhstani
Kenya | Kenyan
Kyrgyzstan | Kyrgyz
Latvia | Latvian
Lebanon | Lebanese
Libya | Libyan
Lithuania | Lithuanian
Luxembourg | Luxembourgish
Malaysia | Malaysian
Malta | Maltese
Mexico | Mexican
Moldova | Moldovan
Mongolia | Mongolian
Montenegro | Montenegrin
Morocco | Moroccan
Nepal | Nepali | Nepalese
Netherlands | Dutch | Holland | The Netherlands
New Zealand | New Zealander
Nicaragua | Nicaraguan
Nigeria | Nigerian
North Korea | North Korean
North Macedonia | Macedonian | Macedonia
Northern Ireland | Northern Irish
Norway | Norwegian
Pakistan | Pakistani
Panama | Panamanian
Paraguay | Paraguayan
Peru | Peruvian
Philippines | Filipino | Philippine
Poland | Polish
Portugal | Portuguese
Puerto Rico | Puerto Rican
Romania | Romanian
Russia | Russian | Russian Federation | Russian Empire
Saudi Arabia | Saudi | Saudi Arabian
Scotland | Scottish | Scots
Senegal | Senegalese
Serbia | Serbian
Singapore | Singaporean
Slovakia | Slovak
Slovenia | Slovenian | Slovene
South Africa | South African
South Korea | South Korean | Korea | Korean
Soviet Union | Soviet | USSR
Spain | Spanish
Sri Lanka | Sri Lankan
Sweden | Swedish
Switzerland | Swiss
Syria | Syrian
Taiwan | Taiwanese
Tanzania | Tanzanian
Thailand | Thai
Trinidad and Tobago | Trinidadian
Tunisia | Tunisian
Turkey | Turkish | Ottoman Empire | Ottoman
Uganda | Ugandan
Ukraine | Ukrainian
United Kingdom | British | UK | U.K. | Great Britain | Britain
United States | American | United States of America | USA | U.S. | U.S.A. | US
Uruguay | Uruguayan
Uzbekistan | Uzbek
Venezuela | Venezuelan
Vietnam | Vietnamese
Wales | Welsh
Yugoslavia | Yugoslav | Yugoslavian
Zimbabwe | Zimbabwean
"""

_PART_OF = {"England": "United Kingdom", "Scotland": "United Kingdom", "Wales": "United Kingdom",
            "Northern Ireland": "United Kingdom", "Puerto Rico": "United States"}  # as Wikidata's countries have it
COUNTRY: dict[str, str] = {}  # a name or demonym, as written -> its country
for _line in _TABLE.strip().splitlines():
    _names = [n.strip() for n in _line.split("|")]
    for _n in _names:
        COUNTRY[_n] = _PART_OF.get(_names[0], _names[0])

# Longest names first, so that "South Korean" wins over "Korean"; case kept ("US" is not "us"). Not a
# country: a demonym before "-born" (where one was born: "Hungarian-born American"), before "title" or
# "language" (a language), before "football" (a sport), or a name inside a place's name ("British Columbia",
# "American Samoa", "New Mexico", "New South Wales", "Lebanon County").
_NOT_A_COUNTRY = (r"-\s?born|\s-\s?born|\s(?:title|language|name|version|dub)|-language|\s(?:Columbia|Samoa|Virgin|"
                  r"Guiana|Ocean|Sea|Polynesia|Indies|Guinea|County|Township|City|River|Street|Avenue|Park|"
                  r"University|College)\b|\sfootball")  # "American football": a sport, not a nationality
_NAMES = re.compile(r"(?<!\w)(?<!New\s)(?<!South\s)(" + "|".join(re.escape(n) for n in sorted(COUNTRY, key=len, reverse=True))
                    + rf")(?![\w]|{_NOT_A_COUNTRY})")


def countries_in(text: str) -> list[tuple[str, int]]:
    """The countries `text` names, in order, each with its character offset; of a compound ("Greek American",
    "French-American") only the last, the citizenship."""
    found = [(COUNTRY[m.group(1)], m.start(), m.end()) for m in _NAMES.finditer(text)]
    kept = [(c, a) for i, (c, a, b) in enumerate(found)
            if not (i + 1 < len(found) and re.fullmatch(r"[\s-]?", text[b: found[i + 1][1]]))]
    return kept
