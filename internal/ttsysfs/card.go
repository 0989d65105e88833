package ttsysfs

// Reading is one value read from sysfs, converted to SI units, and whether
// it was there to read.
type Reading struct {
	Value float64
	OK    bool
}

// Sensor is one hwmon channel: its current value, its limit (_max) and its
// label (_label, "" when the driver gives none).
type Sensor struct {
	Input Reading
	Max   Reading
	Label string
}

// Counter is a counter attribute and whether it was there to read.
type Counter struct {
	Value uint64
	OK    bool
}

// Info is a card's identity, each field "" when its attribute is absent.
type Info struct {
	// CardType is tt_card_type: n150, n300, p150a, ...
	CardType string
	// Serial is tt_serial, the board serial number in hex.
	Serial string
	// ASICID is tt_asic_id, in hex.
	ASICID string
	// FirmwareBundle is tt_fw_bundle_ver, the firmware bundle version.
	FirmwareBundle string
	// M3AppFirmware is tt_m3app_fw_ver, the M3 application firmware.
	M3AppFirmware string
}

// Card is what one read found of card N.
type Card struct {
	// Number is N, the card's number (/dev/tenstorrent/N).
	Number int
	// Arch is the hwmon name: wormhole or blackhole; "" without hwmon.
	Arch string
	// Temperature (°C), Voltage (V), Current (A), Power (W) and Fan (RPM)
	// are the hwmon sensors temp1, in0, curr1, power1 and fan1.
	Temperature, Voltage, Current, Power, Fan Sensor
	// AIClock, AXIClock and ARCClock are tt_aiclk, tt_axiclk and
	// tt_arcclk, in Hz.
	AIClock, AXIClock, ARCClock Reading
	// Heartbeat is tt_heartbeat, which changes while the firmware is
	// alive.
	Heartbeat Counter
	// ThermalTrips is tt_therm_trip_count.
	ThermalTrips Counter
	// Info is the card's identity.
	Info Info
}
