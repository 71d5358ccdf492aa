import test from 'ava';
import { countryToAlpha3, normalizeName, phoneticKeys } from '../../src/modules/screening/sanctions/normalize.ts';

test('names become sorted token sets without case, punctuation or word order', (t) => {
  t.deepEqual(normalizeName('HASSAN, Muhammad al-'), ['hassan', 'muhammad']);
  t.deepEqual(normalizeName('Muhammad al Hassan'), normalizeName('HASSAN, Muhammad al-'));
  t.deepEqual(normalizeName("ABU-MARZUQ, Sa'id"), ['abu', 'marzuq', 'said']);
  t.deepEqual(normalizeName('Smith  Smith-Jones'), ['jones', 'smith']);
  t.deepEqual(normalizeName('J.Smith'), ['j', 'smith']);
  t.deepEqual(normalizeName('Dr.Ayman'), ['ayman']);
});

test('other scripts and diacritics are transliterated to ASCII', (t) => {
  t.deepEqual(normalizeName('Сергей Иванов'), ['ivanov', 'sergey']);
  t.deepEqual(normalizeName('José Gutiérrez-Muñoz'), ['gutierrez', 'jose', 'munoz']);
  t.deepEqual(normalizeName('Ṭāhā Öztürk'), ['ozturk', 'taha']);
});

test('legal forms, titles and particles are dropped', (t) => {
  t.deepEqual(normalizeName('GALAX TRADING CO., LTD.'), ['galax', 'trading']);
  t.deepEqual(normalizeName('Comercial Cimex, S.A. de C.V.'), ['cimex', 'comercial']);
  t.deepEqual(normalizeName('Polmax Sp. z o.o.'), ['polmax']);
  t.deepEqual(normalizeName('Orion Holdings L.L.C.'), ['holdings', 'orion']);
  t.deepEqual(normalizeName('Banco Andino C.A.'), ['andino', 'banco']);
  t.deepEqual(normalizeName('OOO "Romashka"'), ['romashka']);
  t.deepEqual(normalizeName('Heliodor Capital GmbH'), ['capital', 'heliodor']);
  t.deepEqual(normalizeName('AL ZAWAHIRI, Dr. Ayman'), ['ayman', 'zawahiri']);
  t.deepEqual(normalizeName('Sheikh Abdullah bin Khalid'), ['abdullah', 'khalid']);
  t.deepEqual(normalizeName('Juan de la Cruz'), ['cruz', 'juan']);
  t.deepEqual(normalizeName('National Bank of Cuba'), ['bank', 'cuba', 'national']);
});

test('a name made only of dropped words keeps them, and empty input gives no tokens', (t) => {
  t.deepEqual(normalizeName('Company Limited'), ['company', 'limited']);
  t.deepEqual(normalizeName('Al'), ['al']);
  t.deepEqual(normalizeName(''), []);
  t.deepEqual(normalizeName('  ... -- '), []);
});

test('phonetic keys: transliteration variants share a code, numbers are their own key', (t) => {
  t.deepEqual(phoneticKeys('muhammad'), ['MHMT', 'MHMT']);
  t.deepEqual(phoneticKeys('mohammed'), phoneticKeys('muhammad'));
  t.deepEqual(phoneticKeys('youssef'), phoneticKeys('yusuf'));
  t.deepEqual(phoneticKeys('sergei'), ['SRJ', 'SRK']);
  t.deepEqual(phoneticKeys('smith'), ['SM0', 'XMT']);
  t.notDeepEqual(phoneticKeys('kakolele'), phoneticKeys('kakorere'));
  t.deepEqual(phoneticKeys('7'), ['7', '7']);
});

test('countries: codes and the lists\' English names become alpha-3', (t) => {
  t.is(countryToAlpha3('IR'), 'IRN');
  t.is(countryToAlpha3('ru'), 'RUS');
  t.is(countryToAlpha3('irn'), 'IRN');
  t.is(countryToAlpha3('Iran'), 'IRN');
  t.is(countryToAlpha3('Korea, North'), 'PRK');
  t.is(countryToAlpha3("Democratic People's Republic of Korea"), 'PRK');
  t.is(countryToAlpha3('Iran (Islamic Republic of)'), 'IRN');
  t.is(countryToAlpha3('Congo, Democratic Republic of the'), 'COD');
  t.is(countryToAlpha3('Burma'), 'MMR');
  t.is(countryToAlpha3('Syria'), 'SYR');
  t.is(countryToAlpha3('United Kingdom of Great Britain and Northern Ireland'), 'GBR');
  t.is(countryToAlpha3('Türkiye'), 'TUR');
  t.is(countryToAlpha3('possibly Palestinian'), 'PSE');
  t.is(countryToAlpha3('Region: Gaza'), 'PSE');
  t.is(countryToAlpha3(' Mexico '), 'MEX');
  t.is(countryToAlpha3('XX'), null);
  t.is(countryToAlpha3('QQQ'), null);
  t.is(countryToAlpha3('former Soviet Union'), null);
  t.is(countryToAlpha3(''), null);
});
