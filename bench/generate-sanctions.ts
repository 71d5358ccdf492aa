/**
 * Synthetic sanctions list entries for benchmarks: names combined at random from the common given
 * and family names of several naming cultures plus a long tail of invented ones (real lists are
 * half names that occur once), with the aliases real lists carry (other transliterations,
 * "SURNAME, Given" order, initials, shortened company names), birth dates, nationalities, topics
 * and programs. The same count and seed always give the same entries.
 */
import type { SanctionEntry, SanctionSource } from '../src/modules/screening/sanctions/importers.ts';
import { random } from '../models/random.ts';

type EntryBody = Pick<SanctionEntry, 'schema' | 'name' | 'aliases' | 'birth_dates' | 'nationalities'>;

interface Culture {
  given: string[];
  family: string[];
  /** Syllables and endings that invent the long tail of rarer family names real lists are mostly made of. */
  syllables: string[];
  endings: string[];
  countries: string[];
  /** Other spellings of a name part, as different lists transliterate it. */
  variants: Record<string, string[]>;
  /** Cultures that write the family name first; their few family names are common and given names varied. */
  familyFirst?: boolean;
}

const CULTURES: Culture[] = [
  {
    given: ['Muhammad', 'Ahmad', 'Ali', 'Hassan', 'Hussein', 'Omar', 'Khalid', 'Yusuf', 'Ibrahim', 'Abdullah', 'Mahmoud', 'Mustafa', 'Tariq', 'Karim', 'Faisal', 'Hamza', 'Said', 'Nasser', 'Walid', 'Bilal', 'Fatima', 'Aisha', 'Mariam', 'Zainab', 'Layla', 'Nour', 'Huda', 'Salma', 'Rania', 'Samira'],
    family: ['Al Hassan', 'Al Rashid', 'Haddad', 'Mansour', 'Khoury', 'Saleh', 'Aziz', 'Hamdan', 'Al Masri', 'Farouk', 'Jaber', 'Abboud', 'Darwish', 'Al Tamimi', 'Bakri', 'Shami', 'Zaydan', 'Hijazi', 'Suleiman', 'Obeid', 'Khalil', 'Al Najjar', 'Qassem', 'Barakat', 'Nassar', 'Al Shehri', 'Ghanem', 'Sabbagh', 'Atallah', 'Al Zahrani', 'Mahfouz', 'Rahal', 'Al Amiri', 'Tannous', 'Kanaan'],
    countries: ['SYR', 'IRQ', 'LBN', 'YEM', 'SAU', 'EGY', 'JOR', 'ARE', 'LBY', 'SDN'],
    syllables: ['ba', 'da', 'fa', 'ha', 'ja', 'ka', 'ma', 'na', 'qa', 'ra', 'sa', 'sha', 'ta', 'wa', 'za', 'bi', 'di', 'hi', 'ji', 'li', 'mi', 'ni', 'ri', 'si', 'zi', 'bu', 'du', 'hu', 'ku', 'mu', 'nu', 'ru', 'su', 'tu', 'dah', 'far', 'jar', 'kar', 'mar', 'nas', 'sab', 'tam', 'zah', 'kha', 'ghu'],
    endings: ['i', 'ani', 'awi', 'ah', '', 'un', 'iyeh'],
    variants: {
      Muhammad: ['Mohammed', 'Mohamed', 'Mohammad', 'Muhammed'],
      Ahmad: ['Ahmed'],
      Hussein: ['Husayn', 'Hussain'],
      Yusuf: ['Youssef', 'Yousef'],
      Omar: ['Umar'],
      Khalid: ['Khaled'],
      Said: ["Sa'id", 'Saeed'],
      Mahmoud: ['Mahmud'],
      Mustafa: ['Mostafa'],
      Abdullah: ['Abdallah'],
      Nasser: ['Nasir'],
      'Al Hassan': ['al-Hasan', 'Alhassan'],
      'Al Rashid': ['al-Rasheed'],
      Zaydan: ['Zeidan'],
      Suleiman: ['Sulayman'],
      Qassem: ['Kassem', 'Qasim'],
      Mansour: ['Mansur'],
    },
  },
  {
    given: ['Reza', 'Mehdi', 'Hossein', 'Javad', 'Mohsen', 'Hamid', 'Saeed', 'Amir', 'Majid', 'Ali Reza', 'Mojtaba', 'Davoud', 'Farhad', 'Parisa', 'Maryam', 'Zahra', 'Shirin', 'Nasrin', 'Fereshteh', 'Mahnaz'],
    family: ['Rezaei', 'Mohammadi', 'Hosseini', 'Ahmadi', 'Karimi', 'Moradi', 'Jafari', 'Rahimi', 'Ghorbani', 'Sadeghi', 'Tehrani', 'Shirazi', 'Nouri', 'Kazemi', 'Heidari', 'Ebrahimi', 'Asadi', 'Bagheri', 'Mousavi', 'Najafi', 'Soleimani', 'Zarif', 'Akbari', 'Ansari', 'Sharifi'],
    countries: ['IRN'],
    syllables: ['ba', 'da', 'fa', 'ga', 'ha', 'ja', 'ka', 'ma', 'na', 'pa', 'ra', 'sa', 'ta', 'va', 'za', 'bi', 'di', 'hi', 'ki', 'mi', 'ni', 'ri', 'si', 'vi', 'bo', 'do', 'go', 'ho', 'ko', 'mo', 'no', 'ro', 'so', 'kho', 'shah', 'mir', 'dar', 'far', 'gol'],
    endings: ['i', 'ian', 'zadeh', 'pour', 'nejad', 'far', 'ani', 'abadi'],
    variants: { Hossein: ['Hosein', 'Husayn'], Mohsen: ['Muhsin'], Javad: ['Jawad'], Mousavi: ['Musavi', 'Moussavi'], Rezaei: ['Rezaie'], Hosseini: ['Husseini'] },
  },
  {
    given: ['Sergei', 'Alexander', 'Dmitry', 'Andrei', 'Vladimir', 'Ivan', 'Nikolai', 'Mikhail', 'Yuri', 'Oleg', 'Igor', 'Viktor', 'Pavel', 'Gennady', 'Arkady', 'Anna', 'Olga', 'Elena', 'Tatiana', 'Natalia', 'Irina', 'Svetlana', 'Yekaterina'],
    family: ['Ivanov', 'Petrov', 'Smirnov', 'Kuznetsov', 'Popov', 'Sokolov', 'Volkov', 'Fedorov', 'Morozov', 'Lebedev', 'Kozlov', 'Novikov', 'Orlov', 'Zaitsev', 'Pavlov', 'Semenov', 'Golubev', 'Vinogradov', 'Bogdanov', 'Vorobyov', 'Kovalenko', 'Shevchenko', 'Lukashenko', 'Tkachenko', 'Medvedev', 'Belov', 'Gusev', 'Titov', 'Kiselyov', 'Makarov'],
    countries: ['RUS', 'BLR', 'UKR', 'KAZ'],
    syllables: ['bo', 'vo', 'go', 'do', 'zhe', 'ka', 'la', 'ma', 'no', 'pe', 're', 'so', 'te', 'fe', 'kho', 'che', 'sha', 'ba', 've', 'gri', 'kra', 'slo', 'bro', 'zve', 'pro', 'smo', 'tro', 'dru', 'mi', 'li', 'ni', 'ri', 'ti', 'ku', 'ru', 'lu', 'nu', 'bel', 'sor', 'kov', 'lin', 'rog', 'sin', 'tar'],
    endings: ['ov', 'ev', 'in', 'sky', 'enko', 'uk', 'ovich', 'yev', 'kin', 'nikov'],
    variants: {
      Sergei: ['Sergey', 'Serguei'],
      Alexander: ['Aleksandr', 'Alexandre'],
      Dmitry: ['Dmitri', 'Dmitrii'],
      Andrei: ['Andrey'],
      Yuri: ['Yury', 'Iouri'],
      Nikolai: ['Nikolay'],
      Tatiana: ['Tatyana'],
      Natalia: ['Natalya'],
      Yekaterina: ['Ekaterina'],
      Vorobyov: ['Vorobiev'],
      Kiselyov: ['Kiselev'],
      Fedorov: ['Fyodorov'],
      Semenov: ['Semyonov'],
    },
  },
  {
    given: ['Wei', 'Fang', 'Lei', 'Jun', 'Min', 'Jing', 'Qiang', 'Yong', 'Jie', 'Tao', 'Ming', 'Hui', 'Xiaoming', 'Jianguo', 'Zhiwei', 'Hong', 'Yan', 'Ping', 'Hua', 'Guoqiang', 'Haitao', 'Xiuying'],
    family: ['Wang', 'Li', 'Zhang', 'Liu', 'Chen', 'Yang', 'Huang', 'Zhao', 'Wu', 'Zhou', 'Xu', 'Sun', 'Ma', 'Zhu', 'Hu', 'Guo', 'He', 'Lin', 'Gao', 'Luo', 'Zheng', 'Liang', 'Song', 'Tang', 'Han', 'Feng'],
    countries: ['CHN', 'HKG', 'TWN', 'SGP'],
    syllables: ['an', 'bai', 'bo', 'cai', 'chang', 'chun', 'da', 'dong', 'fei', 'gang', 'guang', 'hai', 'hao', 'heng', 'jia', 'jian', 'kai', 'lan', 'long', 'mei', 'ning', 'peng', 'qi', 'qing', 'rong', 'shan', 'sheng', 'shu', 'ting', 'wen', 'xi', 'xiang', 'xin', 'xue', 'ya', 'yi', 'ying', 'yu', 'yuan', 'ze', 'zhen', 'zhi', 'zhong', 'zi'],
    endings: [''],
    variants: { Zhang: ['Chang'], Xu: ['Hsu'], Zhou: ['Chou'], Zhao: ['Chao'], Zheng: ['Cheng'], Huang: ['Wong'], Chen: ['Chan'], Li: ['Lee'] },
    familyFirst: true,
  },
  {
    given: ['Jong Un', 'Min Jun', 'Seo Yeon', 'Ji Hoon', 'Hyun Woo', 'Young Ho', 'Sung Min', 'Chol', 'Myong Hak', 'Kwang Il', 'Song Il', 'Yong Chol', 'Hyon U', 'Jin Sok', 'Su Gwang'],
    family: ['Kim', 'Lee', 'Park', 'Choi', 'Jung', 'Kang', 'Cho', 'Yoon', 'Jang', 'Lim', 'Han', 'Ri', 'Pak', 'Jon', 'Ryu', 'Paek'],
    countries: ['PRK', 'KOR'],
    syllables: ['chol', 'chun', 'dok', 'gil', 'gwang', 'hak', 'ho', 'hun', 'hyok', 'il', 'jin', 'ju', 'kyong', 'man', 'myong', 'nam', 'ok', 'pil', 'rim', 'ryong', 'sam', 'sik', 'sok', 'son', 'su', 'sun', 'tae', 'thae', 'ung', 'won', 'yong', 'yun'],
    endings: [''],
    variants: { Lee: ['Ri', 'Yi'], Park: ['Pak'], Choi: ['Choe'], Jung: ['Chong'], Lim: ['Rim'], 'Jong Un': ['Jong-un'] },
    familyFirst: true,
  },
  {
    given: ['Juan', 'José', 'Carlos', 'Luis', 'Miguel', 'Jorge', 'Pedro', 'Alejandro', 'Fernando', 'Ricardo', 'Rafael', 'Joaquín', 'Ismael', 'Rubén', 'María', 'Ana', 'Carmen', 'Lucía', 'Sofía', 'Isabel', 'Gabriela', 'Guadalupe'],
    family: ['García', 'Rodríguez', 'Martínez', 'Hernández', 'López', 'González', 'Pérez', 'Sánchez', 'Ramírez', 'Torres', 'Flores', 'Rivera', 'Gómez', 'Díaz', 'Cruz', 'Morales', 'Ortiz', 'Gutiérrez', 'Chávez', 'Ramos', 'Castillo', 'Vargas', 'Zambada', 'Guzmán', 'Caro', 'Quintero', 'Arellano', 'Beltrán', 'Carrillo', 'Fuentes'],
    countries: ['MEX', 'COL', 'VEN', 'CUB', 'PER', 'ESP', 'GTM', 'HND'],
    syllables: ['al', 'ba', 'ca', 'cas', 'co', 'du', 'es', 'fa', 'ga', 'gue', 'la', 'lo', 'ma', 'me', 'mon', 'na', 'pa', 'pe', 'que', 'ra', 're', 'ri', 'sa', 'ta', 'to', 'va', 'ver', 'vi', 'za', 'cor', 'bel', 'sol', 'mar', 'ran', 'tel', 'ben', 'dor'],
    endings: ['ez', 'es', 'o', 'a', 'ero', 'ado', 'ino', 'illa', 'ada'],
    variants: { José: ['Jose'], Joaquín: ['Joaquin'], Guzmán: ['Guzman'], Beltrán: ['Beltran'], Gutiérrez: ['Gutierres'] },
  },
  {
    given: ['John', 'James', 'Robert', 'Michael', 'William', 'David', 'Richard', 'Thomas', 'Christopher', 'Mary', 'Patricia', 'Jennifer', 'Linda', 'Elizabeth', 'Sarah', 'Margaret'],
    family: ['Smith', 'Johnson', 'Williams', 'Brown', 'Jones', 'Miller', 'Davis', 'Wilson', 'Anderson', 'Taylor', 'Thomas', 'Moore', 'Jackson', 'White', 'Harris', 'Clark', 'Lewis', 'Walker', 'Thompson', 'McDonald', "O'Brien", 'Fitzgerald'],
    countries: ['GBR', 'USA', 'CAN', 'AUS', 'IRL', 'NZL'],
    syllables: ['ash', 'black', 'brad', 'brook', 'car', 'clay', 'cole', 'dal', 'dun', 'ed', 'fair', 'fal', 'gar', 'hal', 'har', 'hol', 'kings', 'lang', 'mar', 'mid', 'new', 'north', 'ram', 'red', 'ring', 'sand', 'stan', 'stock', 'thorn', 'wal', 'west', 'white', 'win', 'wood'],
    endings: ['son', 'ton', 'ley', 'field', 'man', 'er', 'well', 'by', 'ford', 'ham', 'worth'],
    variants: { Smith: ['Smyth'], Thompson: ['Thomson'], McDonald: ['MacDonald'], Christopher: ['Kristopher'], Elizabeth: ['Elisabeth'] },
  },
  {
    given: ['Abdoulaye', 'Mamadou', 'Ibrahima', 'Moussa', 'Oumar', 'Amadou', 'Ousmane', 'Cheikh', 'Aminata', 'Fatoumata', 'Kadiatou', 'Emeka', 'Chinedu', 'Oluwaseun', 'Adebayo', 'Ngozi', 'Kwame', 'Kofi', 'Jean-Pierre', 'Innocent'],
    family: ['Diallo', 'Traoré', 'Keita', 'Coulibaly', 'Camara', 'Touré', 'Sow', 'Ba', 'Ndiaye', 'Diop', 'Okafor', 'Adeyemi', 'Okonkwo', 'Balogun', 'Mensah', 'Owusu', 'Kabila', 'Mukendi', 'Habyarimana', 'Nkurunziza', 'Bizimana'],
    countries: ['MLI', 'SEN', 'GIN', 'NGA', 'GHA', 'CIV', 'COD', 'RWA', 'BDI'],
    syllables: ['ba', 'bi', 'bo', 'da', 'di', 'fa', 'ga', 'ka', 'ke', 'ki', 'ko', 'la', 'ma', 'mba', 'mbo', 'na', 'nde', 'ndi', 'nku', 'nya', 'nzi', 'o', 'ra', 'sa', 'se', 'si', 'ta', 'to', 'tu', 'wa', 'ya', 'ye', 'za', 'ke', 'ku', 'lu', 'mu', 'ngo', 'chi', 'nwa', 'olu', 'ade'],
    endings: ['', 'ra', 'ma', 'ye', 'ko', 'ba', 'nda'],
    variants: { Mamadou: ['Mohamadou'], Oumar: ['Umar'], Moussa: ['Musa'], Touré: ['Toure'], Traoré: ['Traore'], Cheikh: ['Sheikh'] },
  },
  {
    given: ['Mehmet', 'Mustafa', 'Ahmet', 'Hüseyin', 'Hasan', 'İbrahim', 'Murat', 'Emre', 'Ömer', 'Ayşe', 'Fatma', 'Zeynep', 'Elif', 'Emine'],
    family: ['Yılmaz', 'Kaya', 'Demir', 'Şahin', 'Çelik', 'Yıldız', 'Öztürk', 'Aydın', 'Arslan', 'Doğan', 'Kılıç', 'Aslan', 'Korkmaz', 'Özdemir', 'Koç'],
    countries: ['TUR', 'CYP', 'AZE'],
    syllables: ['ak', 'al', 'ay', 'bal', 'bas', 'bay', 'can', 'cak', 'dem', 'dur', 'er', 'gok', 'gul', 'gun', 'kar', 'kay', 'kur', 'oz', 'sar', 'sen', 'tas', 'tek', 'tun', 'uc', 'ul', 'yal', 'yay', 'yil', 'yu', 'zen'],
    endings: ['oglu', 'er', 'kaya', 'han', 'tas', 'can', 'dag', 'soy', 'bey', 'ci'],
    variants: { Mehmet: ['Mehmed', 'Muhammed'], Ahmet: ['Ahmed'], Hüseyin: ['Huseyin', 'Husein'], Ömer: ['Omer'] },
  },
  {
    given: ['Imran', 'Asif', 'Rashid', 'Zahid', 'Abdul', 'Ravi', 'Rahul', 'Amit', 'Sanjay', 'Gulbuddin', 'Jalaluddin', 'Sirajuddin', 'Priya', 'Anjali', 'Sunita', 'Ayesha'],
    family: ['Khan', 'Ahmed', 'Hussain', 'Sharma', 'Patel', 'Singh', 'Gupta', 'Kumar', 'Chaudhry', 'Malik', 'Iqbal', 'Butt', 'Mirza', 'Siddiqui', 'Haqqani', 'Yousafzai', 'Durrani', 'Akhundzada', 'Baradar', 'Mansoor'],
    countries: ['PAK', 'AFG', 'IND', 'BGD'],
    syllables: ['ba', 'cha', 'da', 'fa', 'ga', 'ha', 'ja', 'ka', 'la', 'ma', 'na', 'pa', 'qa', 'ra', 'sa', 'sha', 'ta', 'wa', 'ya', 'za', 'bhat', 'dar', 'gul', 'jan', 'kar', 'lal', 'man', 'nur', 'pal', 'raj', 'sar', 'var', 'wal', 'zar'],
    endings: ['i', 'zai', 'wala', 'ani', 'khel', 'pur', 'wal', 'an', ''],
    variants: { Hussain: ['Husain', 'Hussein'], Chaudhry: ['Chaudhary', 'Choudhury'], Haqqani: ['Haqani'], Mansoor: ['Mansur'], Akhundzada: ['Akhundzadah'] },
  },
];

const COMPANY_WORDS = ['Golden', 'Crescent', 'Eastern', 'Global', 'Sahara', 'Baltic', 'Orion', 'Phoenix', 'Falcon', 'Atlas', 'Pacific', 'Silk Road', 'Northern', 'Amber', 'Jade', 'Emerald', 'Horizon', 'Caspian', 'Delta', 'Summit', 'Pioneer', 'Liberty', 'Meridian', 'Sapphire', 'Red Sea', 'Andes', 'Union', 'Dragon', 'Cedar', 'Oasis', 'Nile', 'Volga', 'Sunrise', 'Continental', 'Premier', 'Royal'];
const COMPANY_SECTORS = ['Trading', 'Shipping', 'Petroleum', 'Logistics', 'Investment', 'Holding', 'Construction', 'Exchange', 'Bank', 'Industries', 'Metals', 'Technologies', 'Import Export', 'Energy', 'Aviation', 'Chemicals', 'Mining', 'Financial Services', 'Electronics', 'Maritime'];
const LEGAL_FORMS = ['LLC', 'Ltd.', 'FZE', 'S.A. de C.V.', 'OOO', 'GmbH', 'JSC', 'Co., Ltd.', 'S.A.', 'Limited', 'Inc.', 'PJSC', 'Sdn. Bhd.', 'B.V.', 'General Trading LLC'];
const COMPANY_COUNTRIES = ['ARE', 'RUS', 'CHN', 'HKG', 'IRN', 'TUR', 'MEX', 'PAN', 'CYP', 'MYS', 'SYR', 'LBN', 'VEN', 'PRK', 'GBR', 'SGP', 'VGB', 'MLT'];
const VESSEL_WORDS = ['Sea', 'Star', 'Ocean', 'Pearl', 'Wave', 'Wind', 'Glory', 'Fortune', 'Spirit', 'Queen', 'Lady', 'Grace', 'Hope', 'Dawn', 'Blue', 'Mar', 'Azul', 'Victoria', 'Aurora', 'Neptune'];
const FLAGS = ['PAN', 'LBR', 'MHL', 'PRK', 'IRN', 'TGO', 'CMR', 'COM', 'SLE', 'TZA', 'KHM', 'MNG'];
const PROGRAMS: Record<SanctionSource, string[]> = {
  ofac: ['SDGT', 'IRAN', 'IRGC', 'RUSSIA-EO14024', 'UKRAINE-EO13662', 'DPRK3', 'CUBA', 'SDNTK', 'ILLICIT-DRUGS-EO14059', 'SYRIA', 'VENEZUELA-EO13850', 'GLOMAG', 'CYBER2'],
  un: ['Al-Qaida', 'Taliban', 'DPRK', 'Libya', 'Iraq', 'DRC', 'Somalia', 'Yemen', 'SouthSudan', 'CAR'],
  opensanctions: ['us_ofac_sdn', 'eu_fsf', 'gb_hmt_sanctions', 'ch_seco_sanctions', 'ca_dfatd_sema_sanctions', 'au_dfat_sanctions', 'ru_rupep', 'everypolitician', 'interpol_red_notices', 'us_fbi_most_wanted'],
};

export function generateSanctionEntries(count: number, seed: number): SanctionEntry[] {
  const next = random(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const chance = (probability: number): boolean => next() < probability;
  const spelling = (culture: Culture, part: string): string => {
    const variants = culture.variants[part];
    return variants && chance(0.5) ? pick(variants) : part;
  };
  const nextId: Record<SanctionSource, number> = { ofac: 10_000, un: 6_900_000, opensanctions: 1 };
  const pad = (value: number): string => String(value).padStart(2, '0');

  const invent = (culture: Culture, syllableCount: number, ending: string): string => {
    let word = '';
    for (let i = 0; i < syllableCount; i++) word += pick(culture.syllables);
    word += ending;
    return word[0]!.toUpperCase() + word.slice(1);
  };
  const givenName = (culture: Culture): string =>
    culture.familyFirst && chance(0.6) ? invent(culture, 2, '') : pick(culture.given);
  const familyName = (culture: Culture): string =>
    culture.familyFirst || chance(0.4) ? pick(culture.family) : invent(culture, 1 + Math.floor(next() * 2), pick(culture.endings));

  const person = (culture: Culture): EntryBody => {
    const given = givenName(culture);
    const middle = !culture.familyFirst && chance(0.4) ? givenName(culture) : undefined;
    const family = familyName(culture);
    const name = culture.familyFirst
      ? `${family.toUpperCase()} ${given}`
      : [given, middle, family].filter((part) => part !== undefined).join(' ');
    const aliases = new Set<string>();
    const aliasCount = Math.floor(next() * 4);
    for (let i = 0; i < aliasCount; i++) {
      const variantGiven = spelling(culture, given);
      const variantFamily = spelling(culture, family);
      const form = next();
      if (form < 0.4) aliases.add(`${variantFamily.toUpperCase()}, ${[variantGiven, middle].filter(Boolean).join(' ')}`);
      else if (form < 0.7) aliases.add(`${variantGiven} ${variantFamily}`);
      else if (form < 0.95) aliases.add(`${givenName(culture)} ${variantFamily}`);
      else aliases.add(`${given[0]}. ${variantFamily}`);
    }
    aliases.delete(name);
    const birthDates: string[] = [];
    if (chance(0.85)) {
      const year = 1940 + Math.floor(next() * 62);
      if (chance(0.6)) birthDates.push(`${year}-${pad(1 + Math.floor(next() * 12))}-${pad(1 + Math.floor(next() * 28))}`);
      else birthDates.push(String(year));
      if (chance(0.15)) birthDates.push(String(year + 1 + Math.floor(next() * 3)));
    }
    const nationalities = chance(0.8) ? [pick(culture.countries)] : [];
    if (nationalities.length > 0 && chance(0.1)) nationalities.push(pick(culture.countries));
    return { schema: 'person', name, aliases: [...aliases], birth_dates: birthDates, nationalities: [...new Set(nationalities)] };
  };

  const organization = (): EntryBody => {
    const culture = pick(CULTURES);
    const roll = next();
    const words =
      roll < 0.3
        ? familyName(culture)
        : roll < 0.6
          ? invent(culture, 2 + Math.floor(next() * 2), '')
          : `${pick(COMPANY_WORDS)}${chance(0.3) ? ` ${pick(COMPANY_WORDS)}` : ''}`;
    const core = `${words} ${pick(COMPANY_SECTORS)}`;
    const name = `${core} ${pick(LEGAL_FORMS)}`.toUpperCase();
    const aliases: string[] = [];
    if (chance(0.5)) aliases.push(core);
    if (chance(0.3)) aliases.push(core.split(/\s+/).map((word) => word[0]).join('').toUpperCase());
    if (chance(0.2)) aliases.push(`${pick(COMPANY_WORDS)} ${pick(COMPANY_SECTORS)} ${pick(LEGAL_FORMS)}`);
    return { schema: 'organization', name, aliases, birth_dates: [], nationalities: chance(0.9) ? [pick(COMPANY_COUNTRIES)] : [] };
  };

  const vessel = (): EntryBody => ({
    schema: 'vessel',
    name: [pick(VESSEL_WORDS), chance(0.5) ? pick(VESSEL_WORDS) : invent(pick(CULTURES), 2, ''), chance(0.4) ? String(1 + Math.floor(next() * 20)) : '']
      .join(' ')
      .trim()
      .toUpperCase(),
    aliases: [],
    birth_dates: [],
    nationalities: [pick(FLAGS)],
  });

  const entries: SanctionEntry[] = [];
  for (let i = 0; i < count; i++) {
    const kind = next();
    const body = kind < 0.75 ? person(pick(CULTURES)) : kind < 0.96 ? organization() : vessel();
    const sourceRoll = next();
    const source: SanctionSource = sourceRoll < 0.45 ? 'ofac' : sourceRoll < 0.6 ? 'un' : 'opensanctions';
    const topicRoll = next();
    const topics =
      source !== 'opensanctions' || topicRoll < 0.6
        ? ['sanction']
        : topicRoll < 0.85
          ? ['pep']
          : topicRoll < 0.95
            ? ['crime']
            : ['sanction', 'crime'];
    const id = nextId[source]++;
    entries.push({
      source,
      source_id: source === 'opensanctions' ? `NK-gen${id.toString(36)}` : String(id),
      ...body,
      topics,
      programs: [pick(PROGRAMS[source])],
    });
  }
  return entries;
}
