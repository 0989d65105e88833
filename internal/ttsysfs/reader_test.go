package ttsysfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttkit/ttkit/internal/kmdtest"
)

func read(t *testing.T, r *Reader) []Card {
	t.Helper()
	cards, errs := r.Read(nil)
	require.Empty(t, errs)
	return cards
}

// TestRead_N300 reads the shared Wormhole n300 tree: a passively cooled
// card, so no fan, and no thermal trip count (Blackhole only).
func TestRead_N300(t *testing.T) {
	t.Parallel()
	cards := read(t, New(Options{Root: kmdtest.CopySysfs(t, "n300").Root}))
	require.Len(t, cards, 1)
	assert.Equal(t, Card{
		Number:       0,
		Arch:         "wormhole",
		Temperature:  Sensor{Input: Reading{48.5, true}, Max: Reading{75, true}, Label: "asic_temp"},
		Voltage:      Sensor{Input: Reading{0.812, true}, Max: Reading{0.95, true}, Label: "vcore"},
		Current:      Sensor{Input: Reading{38.25, true}, Max: Reading{160, true}, Label: "current"},
		Power:        Sensor{Input: Reading{31.25, true}, Max: Reading{150, true}, Label: "power"},
		AIClock:      Reading{1000e6, true},
		AXIClock:     Reading{900e6, true},
		ARCClock:     Reading{540e6, true},
		Heartbeat:    Counter{1234567, true},
		ThermalTrips: Counter{},
		Info: Info{CardType: "n300", Serial: "100001832192118A", ASICID: "5B1A3C9D0E7F2468",
			FirmwareBundle: "18.4.0.0", M3AppFirmware: "5.13.0.0"},
	}, roundCard(cards[0]))
}

// TestRead_P150 reads the shared Blackhole p150 tree, fan and thermal
// trips included.
func TestRead_P150(t *testing.T) {
	t.Parallel()
	cards := read(t, New(Options{Root: kmdtest.CopySysfs(t, "p150").Root}))
	require.Len(t, cards, 1)
	assert.Equal(t, Card{
		Number:       0,
		Arch:         "blackhole",
		Temperature:  Sensor{Input: Reading{61.25, true}, Max: Reading{90, true}, Label: "asic_temp"},
		Voltage:      Sensor{Input: Reading{0.765, true}, Max: Reading{0.9, true}, Label: "vcore"},
		Current:      Sensor{Input: Reading{112.5, true}, Max: Reading{250, true}, Label: "current"},
		Power:        Sensor{Input: Reading{86.125, true}, Max: Reading{300, true}, Label: "power"},
		Fan:          Sensor{Input: Reading{2430, true}, Max: Reading{6000, true}, Label: "fan"},
		AIClock:      Reading{1350e6, true},
		AXIClock:     Reading{1000e6, true},
		ARCClock:     Reading{800e6, true},
		Heartbeat:    Counter{987654, true},
		ThermalTrips: Counter{2, true},
		Info: Info{CardType: "p150a", Serial: "0000042731206152", ASICID: "7C2E91D4A0B35F18",
			FirmwareBundle: "18.7.0.0", M3AppFirmware: "0.24.0.0"},
	}, roundCard(cards[0]))
}

// roundCard rounds the converted values to what the files hold (a mV to
// V conversion is not exact in binary).
func roundCard(c Card) Card {
	round := func(r *Reading) {
		if r.OK {
			r.Value = float64(int64(r.Value*1e6+0.5)) / 1e6
		}
	}
	for _, s := range []*Sensor{&c.Temperature, &c.Voltage, &c.Current, &c.Power, &c.Fan} {
		round(&s.Input)
		round(&s.Max)
	}
	return c
}

// An attribute the firmware does not report is absent: no value, no
// error, the rest read as usual.
func TestRead_MissingAttributesAreSkipped(t *testing.T) {
	t.Parallel()
	fs := kmdtest.CopySysfs(t, "p150")
	for _, name := range []string{"tt_axiclk", "tt_heartbeat", "tt_serial", "hwmon/temp1_label", "hwmon/power1_max", "hwmon/fan1_input"} {
		fs.Remove(0, name)
	}
	cards := read(t, New(Options{Root: fs.Root}))
	require.Len(t, cards, 1)
	c := cards[0]
	assert.False(t, c.AXIClock.OK)
	assert.False(t, c.Heartbeat.OK)
	assert.Empty(t, c.Info.Serial)
	assert.Empty(t, c.Temperature.Label)
	assert.False(t, c.Power.Max.OK)
	assert.False(t, c.Fan.Input.OK)
	assert.True(t, c.Fan.Max.OK, "fan1_max is still there")
	assert.True(t, c.Temperature.Input.OK)
	assert.True(t, c.AIClock.OK)
	assert.Equal(t, "p150a", c.Info.CardType)
}

// TestRead_HwmonVanishes: a card's hwmon directory goes away after the
// reader found it (the driver unregistered it, as on a reset): the read
// skips its sensors without an error and still reports the card's class
// attributes and every other card; when hwmon comes back under another
// name, the reader finds it.
func TestRead_HwmonVanishes(t *testing.T) {
	t.Parallel()
	fs := kmdtest.BusySysfs(t, t.TempDir(), 2)
	r := New(Options{Root: fs.Root})
	cards := read(t, r)
	require.Len(t, cards, 2)
	require.True(t, cards[1].Temperature.Input.OK)

	files := fs.RemoveHwmon(1)
	cards = read(t, r)
	require.Len(t, cards, 2)
	assert.False(t, cards[1].Temperature.Input.OK, "no sensor of a vanished hwmon")
	assert.Empty(t, cards[1].Arch)
	assert.True(t, cards[1].AIClock.OK, "the class attributes are still read")
	assert.True(t, cards[0].Temperature.Input.OK, "the other card is untouched")

	// It comes back as hwmon9.
	fs.AddHwmon(1, "hwmon9", files)
	cards = read(t, r)
	assert.True(t, cards[1].Temperature.Input.OK)
	assert.Equal(t, "blackhole", cards[1].Arch)
}

// A real read error (here a directory where a value should be, EISDIR)
// and a value that is not a number are reported, naming the file, and the
// rest of the card is read.
func TestRead_ErrorsNameTheFile(t *testing.T) {
	t.Parallel()
	fs := kmdtest.CopySysfs(t, "p150")
	fs.Remove(0, "hwmon/temp1_input")
	require.NoError(t, os.Mkdir(filepath.Join(fs.HwmonDir(0), "temp1_input"), 0o755))
	fs.Set(0, "tt_aiclk", "fast")
	cards, errs := New(Options{Root: fs.Root}).Read(nil)
	require.Len(t, cards, 1)
	require.Len(t, errs, 2)
	joined := errs[0].Error() + "\n" + errs[1].Error()
	assert.Contains(t, joined, "temp1_input")
	assert.Contains(t, joined, `tt_aiclk: "fast" is not a decimal number`)
	assert.True(t, strings.HasPrefix(errs[0].Error(), "card 0: "))
	assert.False(t, cards[0].Temperature.Input.OK)
	assert.False(t, cards[0].AIClock.OK)
	assert.True(t, cards[0].Power.Input.OK)
}

func TestRead_NoDriver(t *testing.T) {
	t.Parallel()
	cards, errs := New(Options{Root: t.TempDir()}).Read(nil)
	assert.Empty(t, cards)
	assert.Empty(t, errs)
}

// The identity, labels and limits are re-read every StaticEvery reads, so
// a flashed firmware is reported within that many cycles; the values read
// every time follow the card at once.
func TestRead_StaticAttributesRefresh(t *testing.T) {
	t.Parallel()
	fs := kmdtest.CopySysfs(t, "n300")
	r := New(Options{Root: fs.Root, StaticEvery: 3})
	read(t, r)
	fs.Set(0, "tt_fw_bundle_ver", "19.0.0.0")
	fs.Set(0, "tt_heartbeat", "1234568")
	c := read(t, r)[0]
	assert.Equal(t, "18.4.0.0", c.Info.FirmwareBundle)
	assert.Equal(t, uint64(1234568), c.Heartbeat.Value)
	read(t, r)
	assert.Equal(t, "19.0.0.0", read(t, r)[0].Info.FirmwareBundle)
}

// A card that goes away leaves the list; one that appears joins it.
func TestRead_CardsComeAndGo(t *testing.T) {
	t.Parallel()
	fs := kmdtest.BusySysfs(t, t.TempDir(), 3)
	r := New(Options{Root: fs.Root})
	require.Len(t, read(t, r), 3)
	require.NoError(t, os.Remove(fs.CardDir(1)))
	cards := read(t, r)
	require.Len(t, cards, 2)
	assert.Equal(t, []int{0, 2}, []int{cards[0].Number, cards[1].Number})
}

func TestParseInt(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"0": 0, "48500": 48500, "-1250": -1250} {
		got, err := parseInt([]byte(in))
		assert.NoError(t, err)
		assert.Equal(t, want, got)
	}
	for _, in := range []string{"", "-", "1.5", "0x10", "1234567890123456789"} {
		_, err := parseInt([]byte(in))
		assert.Error(t, err, in)
	}
}

// Many cards are read a few at once; each comes out whole and in order,
// and a card's fault stays its own.
func TestRead_ManyCardsInParallel(t *testing.T) {
	t.Parallel()
	fs := kmdtest.BusySysfs(t, t.TempDir(), 16)
	fs.Set(11, "tt_aiclk", "bad")
	r := New(Options{Root: fs.Root, Workers: 4})
	for range 3 {
		cards, errs := r.Read(nil)
		require.Len(t, cards, 16)
		require.Len(t, errs, 1)
		assert.Contains(t, errs[0].Error(), "card 11: ")
		for i, c := range cards {
			assert.Equal(t, i, c.Number)
			assert.InDelta(t, 55+float64(i)*0.125, c.Temperature.Input.Value, 1e-9)
			assert.Equal(t, uint64(1000+i), c.Heartbeat.Value)
			assert.Equal(t, i != 11, c.AIClock.OK)
		}
	}
	require.NoError(t, r.Close())
}
